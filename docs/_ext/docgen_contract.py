"""The contract page ("what works with what") as tables a reader can scan.

The cells and their expected outcomes are those ``tests/test_contract.py`` runs, from
``tests/_contract.py``; its prose (what a ✓ means, the axes) is taken from its own
page text. Here the pairs of axes are laid out one table per estimator (each input,
option and operation beside it), one per operation (each input and option) and one
per option (each input): at most six narrow columns, a word or a symbol in each cell
(✓, refused, n/a, defect, each with the number of its line in the legend, which comes
first), headers that stay in view while the rows scroll.
"""

from __future__ import annotations

import html
import re


def _outcome(outcome, legend: dict) -> tuple[str, str, str]:
    """(css class, the cell's text, its explanation) of one expected outcome."""
    from tests import _contract as c

    if outcome is None:
        return "ok", "✓", "equals the dense in-memory reference"
    if isinstance(outcome, c.Defect):
        text = (
            f"issue 38 item {outcome.item}: "
            if outcome.item
            else "found by the matrix: "
        ) + outcome.reason
        kind, word = "defect", "defect"
    elif isinstance(outcome, c.Refused):
        names = outcome.error if isinstance(outcome.error, tuple) else (outcome.error,)
        when = "before compute" if outcome.before_compute else "after the first read"
        text = (
            f"refused {when} ({' or '.join(e.__name__ for e in names)}: "
            f"“{outcome.match}”): {outcome.reason}"
        )
        kind, word = "refused", "refused"
    else:
        text, kind, word = f"does not apply: {outcome.reason}", "na", "n/a"
    prefix = {"refused": "R", "defect": "D", "na": "N"}[kind]
    if text not in legend:
        legend[text] = (
            f"{prefix}{sum(1 for m in legend.values() if m[0] == prefix) + 1}"
        )
    return kind, f"{word} {legend[text]}", text


def _cell(outcome, legend: dict) -> str:
    kind, label, title = _outcome(outcome, legend)
    word, _, mark = label.partition(" ")
    link = f' <a href="#legend-{mark}">{mark}</a>' if mark else ""
    return (
        f'<td class="sp-{kind}" title="{html.escape(title)}">{html.escape(word)}'
        f"{link}</td>"
    )


def _side_by_side(
    columns: list[tuple[str, list[tuple[str, object]]]], legend: dict
) -> str:
    """One HTML table: for each (axis, [(value, outcome)]) a value column and an outcome
    column, side by side, as many rows as the longest."""
    head = "".join(
        f'<th scope="col">{html.escape(axis)}</th><th scope="col">outcome</th>'
        for axis, _ in columns
    )
    rows = []
    for i in range(max(len(values) for _, values in columns)):
        cells = []
        for _, values in columns:
            if i < len(values):
                value, outcome = values[i]
                cells.append(
                    f"<td><code>{html.escape(value)}</code></td>"
                    + _cell(outcome, legend)
                )
            else:
                cells.append("<td></td><td></td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<table class="sp-contract">\n<thead><tr>'
        + head
        + "</tr></thead>\n<tbody>\n"
        + "\n".join(rows)
        + "\n</tbody>\n</table>\n"
    )


def contract_page() -> str:
    from tests import _contract as c

    estimators, kinds, options, ops = c._names()
    d_est, d_kind, d_opt, d_op = c.DEFAULTS
    legend: dict = {}
    original = c.markdown()
    intro = original[: original.index("\n## ")]
    axes = original[original.index("\n## The axes") :]
    intro = re.sub(
        r"A cell marked R is refused.*?– does not apply\.",
        "A cell marked *refused* is refused before any compute (NaN entries, which "
        "only a read finds: at the end of the first pass), with the error given in "
        "the legend; *defect* marks a known defect, being fixed; *n/a* does not "
        "apply. The number beside each word is its line in the legend (hover a "
        "cell for it).",
        intro,
        flags=re.S,
    )

    def at(estimator=d_est, kind=d_kind, option=d_opt, op=d_op):
        return c.expectation((estimator, kind, option, op))

    body = [
        "## One table per estimator\n",
        f"Each estimator and solver with every input (option `{d_opt}`, operation "
        f"`{d_op}`), every option (input `{d_kind}`, operation `{d_op}`) and every "
        f"operation (input `{d_kind}`, option `{d_opt}`).\n",
    ]
    for e in estimators:
        body += [
            f"### {e}\n",
            _side_by_side(
                [
                    ("input", [(k, at(estimator=e, kind=k)) for k in kinds]),
                    ("option", [(o, at(estimator=e, option=o)) for o in options]),
                    ("operation", [(op, at(estimator=e, op=op)) for op in ops]),
                ],
                legend,
            ),
        ]
    body += [
        "## One table per operation\n",
        f"Each operation after a fit of `{d_est}` with every input (option `{d_opt}`) "
        f"and every option (input `{d_kind}`).\n",
    ]
    for op in ops:
        body += [
            f"### {op}\n",
            _side_by_side(
                [
                    ("input", [(k, at(kind=k, op=op)) for k in kinds]),
                    ("option", [(o, at(option=o, op=op)) for o in options]),
                ],
                legend,
            ),
        ]
    body += [
        "## One table per option\n",
        f"Each option with every input (`{d_est}`, operation `{d_op}`).\n",
    ]
    for o in options:
        body += [
            f"### {o}\n",
            _side_by_side(
                [("input", [(k, at(kind=k, option=o)) for k in kinds])], legend
            ),
        ]
    body += [
        "## Beyond pairs\n",
        "Junctions of three or four features that no pair of axes reaches "
        "(`EXTRA_CELLS`); `save-load>OP` runs OP with the model saved and loaded.\n",
    ]
    rows = []
    for e, k, o, op in c.extra_cells():
        rows.append(
            "<tr>"
            + "".join(f"<td><code>{html.escape(v)}</code></td>" for v in (e, k, o, op))
            + _cell(c.expectation((e, k, o, op)), legend)
            + "</tr>"
        )
    body.append(
        '<table class="sp-contract">\n<thead><tr><th scope="col">estimator</th>'
        '<th scope="col">input</th><th scope="col">option</th>'
        '<th scope="col">operation</th><th scope="col">outcome</th></tr></thead>\n'
        "<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>\n"
    )

    # the legend comes first: its numbers are known once every table is made
    order = {"R": 0, "D": 1, "N": 2}
    items = sorted(legend.items(), key=lambda kv: (order[kv[1][0]], int(kv[1][1:])))
    head = [
        "## Legend\n",
        '<ul class="sp-legend">\n<li><span class="sp-ok">✓</span> equals the dense '
        "in-memory reference</li>\n",
    ]
    for text, mark in items:
        kind = {"R": "refused", "D": "defect", "N": "na"}[mark[0]]
        head.append(
            f'<li id="legend-{mark}"><span class="sp-{kind}">{mark}</span> '
            f"{html.escape(text)}</li>\n"
        )
    head.append("</ul>\n")
    return intro + "\n\n" + "".join(head) + "\n" + "\n".join(body) + axes
