"""Definitions of the figures the reports show, and the names of the sampling designs and
multiplicity corrections, written once for the command-line help, the reports and the
documentation's glossary. A root module that imports nothing, so that the CLI's parser
(``dst-judge --help``) reads them without loading the analysis stage (numpy, scipy)."""

from __future__ import annotations

from typing import Literal

Allocation = Literal["equal", "proportional"]
ALLOCATIONS: tuple[Allocation, ...] = ("equal", "proportional")
Design = Literal["judge-rule", "random", "domain"]
DESIGNS: tuple[Design, ...] = ("judge-rule", "random", "domain")
Unit = Literal["turn", "dialogue"]
UNITS: tuple[Unit, ...] = ("turn", "dialogue")
Correction = Literal["holm", "by"]
CORRECTIONS: tuple[Correction, ...] = ("holm", "by")
"""Multiplicity corrections across a leaderboard's pairs (Holm's step-down, Benjamini–Yekutieli)."""

JUDGE_JGA_SHORT = ("Judge JGA: the share of turns after which the judge leaves nothing "
                   "outstanding in the dialogue (no slot still incorrect or missed); unlike "
                   "TSA it carries errors forward, and it can still exceed TSA.")
"""One line under a report that shows judge JGA."""

JUDGE_JGA_DEFINITION = (
    "Judge JGA (joint goal accuracy as the judge sees it) is the share of turns after which "
    "the dialogue's state, followed by the judge from the first turn, holds nothing "
    "outstanding: no slot still marked incorrect and none still missed. TSA (turn state "
    "accuracy) asks whether one turn's own predictions are right; judge JGA asks whether "
    "everything predicted so far stands, so an error counts again on every later turn until a "
    "correct prediction of that slot clears it. That usually puts judge JGA below TSA, but it "
    "can exceed it: a turn can be wrong without leaving anything outstanding (it repeats a "
    "pair already judged correct, or a value breaks a value rule such as 'book people' 1 to "
    "19), and such a turn lowers TSA only. Under --semantics paper, judge JGA is read before "
    "each turn is integrated (a turn's own errors count only from the next turn, the last "
    "turn's never) and a slot once incorrect stays so. A turn that is an error row enters "
    "neither figure, and no later turn of its dialogue enters judge JGA.")
"""The glossary entry: what judge JGA measures and why it can exceed TSA."""
