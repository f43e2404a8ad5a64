"""Load and render the judge's prompt templates (Jinja2 files in ``prompts/``).

Each dimension has a static system message (instruction, schema, reasoning path, output format),
optionally followed by few-shot example exchanges, and then the dialogue-specific user message.
Keeping every static part first lets providers cache the prefix. The template hash covers every
file a dimension uses and goes into every result.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import jinja2

from .._config import Method
from .._digest import sha256_text
from .._resources import package_dir
from ..data import Schema

Dimension = Literal["accuracy", "completeness", "joint"]
RESULT_KEYS: dict[str, tuple[str, ...]] = {
    "accuracy": ("incorrect_domain_slot",),
    "completeness": ("missed_domain_slot",),
    "joint": ("incorrect_domain_slot", "missed_domain_slot"),
}
_SHARED = ("_intro.j2", "_schema.j2", "_turn.j2", "_accuracy_instruction.j2",
           "_completeness_instruction.j2", "_joint_instruction.j2")


def dimensions_of(method: Method) -> tuple[Dimension, ...]:
    """Two-prompt methods judge accuracy and completeness; single-prompt ones a joint answer."""
    return ("accuracy", "completeness") if method.startswith("two-dim") else ("joint",)


@dataclass(frozen=True)
class RenderedPrompt:
    """The messages of one call, with the hashes and sizes reported for it."""

    dimension: Dimension
    messages: list[dict[str, str]]
    template_hash: str
    prompt_hash: str
    static_chars: int
    total_chars: int


def _utterances(pairs: Sequence[tuple[str, str]]) -> list[str]:
    # Each utterance is one JSON string on its own line after its speaker: newlines, quotes and
    # fences in untrusted text stay inside the string and cannot fake a heading, a speaker or
    # the end of the data. Empty utterances (the agent before the first turn) are left out.
    return [f"{speaker}: {json.dumps(text, ensure_ascii=False)}"
            for speaker, text in pairs if text]


def turn_context(history: Sequence[tuple[str, str]], system: str, user: str,
                 state: dict[str, str]) -> dict[str, str]:
    """The dialogue-specific template variables of one turn."""
    past = _utterances(history)
    return {"history": "\n".join(past) if past else "(none: this is the first turn)",
            "current": "\n".join(_utterances([("agent", system), ("user", user)])),
            "state": json.dumps(state, ensure_ascii=False)}


def _compress(values: Sequence[str]) -> str:
    """A value list with runs of three or more consecutive integers written ``a-b``."""
    out: list[str] = []
    run: list[int] = []

    def flush() -> None:
        if len(run) >= 3:
            out.append(f"{run[0]}-{run[-1]}")
        else:
            out.extend(str(n) for n in run)
        run.clear()

    for value in values:
        if value.isdigit() and str(int(value)) == value and (not run or int(value) == run[-1] + 1):
            run.append(int(value))
            continue
        flush()
        if value.isdigit() and str(int(value)) == value:
            run.append(int(value))
        else:
            out.append(value)
    flush()
    return ", ".join(out)


def _bare(slot: Any, domain: str) -> str:
    if slot.slot:
        return str(slot.slot)
    prefix = f"{domain}-"
    return slot.name[len(prefix):] if slot.name.startswith(prefix) else slot.name


def schema_context(schema: Schema) -> dict[str, Any]:
    """The schema as the prompts show it: every slot once, under its domain, and each list of
    fixed values (or value format) once, labelled with the slots that share it: a bare slot
    name when every slot of that name shares it, the full names otherwise."""
    domains = [{"domain": d.domain, "slots": [_bare(s, d.domain) for s in d.slots]}
               for d in schema.domains]
    bare_names: dict[str, list[str]] = {}
    groups: dict[str, list[tuple[str, str]]] = {}
    for d in schema.domains:
        for s in d.slots:
            bare = _bare(s, d.domain)
            bare_names.setdefault(bare, []).append(s.name)
            if s.is_categorical and s.possible_values:
                groups.setdefault(_compress(s.possible_values), []).append((bare, s.name))
            elif s.value_format:
                groups.setdefault(s.value_format, []).append((bare, s.name))
    value_groups = []
    for values, members in groups.items():
        names = {name for _, name in members}
        label: list[str] = []
        for bare, name in members:
            whole = set(bare_names[bare]) <= names
            entry = bare if whole else name
            if entry not in label:
                label.append(entry)
        value_groups.append((", ".join(label), values))
    return {"domains": domains, "value_groups": value_groups}


@functools.lru_cache(maxsize=8)
def _environment(directory: str) -> jinja2.Environment:
    """One Jinja2 environment per template folder, so templates compile once per process
    (jinja2 re-reads a template whose file changed)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory), undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False, autoescape=False)


class PromptSet:
    """The templates of one method and prompt variant, bound to a schema."""

    def __init__(self, schema: Schema, method: Method,
                 variant: Literal["zero-shot", "few-shot"] = "zero-shot",
                 directory: str | Path | None = None) -> None:
        self.schema = schema
        self.method = method
        self.variant = variant
        self.directory = Path(directory) if directory else package_dir("prompts")
        self._env = _environment(str(self.directory))
        self._static: dict[str, list[dict[str, str]]] = {}
        self._hashes: dict[str, str] = {}

    @property
    def dimensions(self) -> tuple[Dimension, ...]:
        return dimensions_of(self.method)

    def _files(self, dimension: Dimension) -> list[Path]:
        files = [self.directory / self.method / f"{dimension}.system.j2",
                 self.directory / self.method / f"{dimension}.user.j2",
                 *(self.directory / name for name in _SHARED)]
        if self.variant == "few-shot":
            files.append(self.directory / "few-shot" / f"{dimension}.json")
        return files

    def template_hash(self, dimension: Dimension) -> str:
        """Hash of every template file the dimension uses (names and contents), read once."""
        if dimension not in self._hashes:
            digest = hashlib.sha256(f"{self.method}/{dimension}/{self.variant}".encode())
            for path in self._files(dimension):
                digest.update(path.name.encode())
                digest.update(path.read_bytes())
            self._hashes[dimension] = digest.hexdigest()
        return self._hashes[dimension]

    @cached_property
    def _schema_context(self) -> dict[str, Any]:
        return schema_context(self.schema)

    def _render_turn(self, dimension: Dimension, history: Sequence[tuple[str, str]],
                     system: str, user: str, state: dict[str, str]) -> str:
        template = self._env.get_template(f"{self.method}/{dimension}.user.j2")
        return template.render(**turn_context(history, system, user, state)).strip() + "\n"

    def static_messages(self, dimension: Dimension) -> list[dict[str, str]]:
        """System message and few-shot exchanges: identical for every turn."""
        if dimension not in self._static:
            system = self._env.get_template(f"{self.method}/{dimension}.system.j2")
            messages = [{"role": "system",
                         "content": system.render(**self._schema_context).strip() + "\n"}]
            if self.variant == "few-shot":
                path = self.directory / "few-shot" / f"{dimension}.json"
                for example in json.loads(path.read_text(encoding="utf-8"))["examples"]:
                    messages.append({"role": "user", "content": self._render_turn(
                        dimension, example["history"], example["system"], example["user"],
                        example["state"])})
                    messages.append({"role": "assistant",
                                     "content": json.dumps(example["answer"], ensure_ascii=False)})
            self._static[dimension] = messages
        return self._static[dimension]

    def render(self, dimension: Dimension, history: Sequence[tuple[str, str]], system: str,
               user: str, state: dict[str, str]) -> RenderedPrompt:
        """Messages for judging one turn in one dimension."""
        static = self.static_messages(dimension)
        turn = {"role": "user", "content": self._render_turn(dimension, history, system, user,
                                                             state)}
        messages = [*static, turn]
        static_chars = sum(len(m["content"]) for m in static)
        return RenderedPrompt(
            dimension=dimension, messages=messages,
            template_hash=self.template_hash(dimension),
            prompt_hash=sha256_text(json.dumps(messages, sort_keys=True, ensure_ascii=False)),
            static_chars=static_chars, total_chars=static_chars + len(turn["content"]))
