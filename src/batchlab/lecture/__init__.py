"""The 原文 (the lecture notes) as data and criteria: its case study, the audit of its numbers, and the verdicts that decide whether a claim holds. Built on ``formulas`` only."""
