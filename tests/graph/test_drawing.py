"""Drawn plans: the operator graph as DOT and SVG, with arrangements, loops, feedback and state sizes.

The drawing is checked against the dataflow it draws: one box per
operator, one edge per connection, the loop's body inside its cluster,
the feedback edge dashed, and on a flow that has run, each operator's
rows as ``flow.stats()`` counts them.  The built-in SVG is parsed as XML;
Graphviz's output is checked where ``dot`` is installed.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

import ddflow
from ddflow.graph.drawing import drawing, graphviz, render, to_dot, to_svg

SVG = "{http://www.w3.org/2000/svg}"


def reach_flow() -> tuple[ddflow.Dataflow, ddflow.InputHandle]:
    flow = ddflow.Dataflow(name="reach")
    e_in, e = flow.new_collection("edges")
    roots = e.project(0, 0)
    roots.iterate(lambda r: r.join(e.enter(r.scope)).project(2, 1).concat(r).distinct()).capture(name="out")
    return flow, e_in


def test_the_dot_of_a_whole_dataflow_matches_its_graph():
    flow, e_in = reach_flow()
    e_in.update([(0, 1), (1, 2), (2, 3)], times=0)
    flow.advance_to(1)
    flow.run()
    dot = flow.explain(format="dot")
    nodes = list(flow.top.all_nodes())
    boxes = re.findall(r'^\s*n(\d+) \[label="([^"]*)"(, peripheries=2)?\];$', dot, re.M)
    assert len(boxes) == len(nodes)
    edges = re.findall(r"^\s*n(\d+) -> n(\d+)( \[style=dashed, constraint=false\])?;$", dot, re.M)
    assert len(edges) == sum(len(n.targets) for n in nodes)
    assert sum(1 for *_, back in edges if back) == 1  # the loop's one feedback edge
    assert dot.count("subgraph cluster_") == 1 and 'label="loop ' in dot
    rows = {s["operator"]: s["records"] for s in flow.stats()}
    for _, label, arranged in boxes:
        name = label.split("\\n")[0]
        held = re.search(r"\\n([\d,]+) rows", label)
        assert (int(held.group(1).replace(",", "")) if held else 0) == rows[name]
        if "Arrange" in label.split("\\n")[1]:
            assert arranged
    assert any(arranged for *_, arranged in boxes)


def test_a_query_is_drawn_in_a_scratch_dataflow_and_this_one_is_unchanged():
    flow = ddflow.Dataflow()
    flow.new_collection("orders", schema={"cust": "string", "amount": "decimal(10,2)"})
    flow.sql("CREATE VIEW big AS SELECT * FROM orders WHERE amount > 10")
    before = len(list(flow.top.all_nodes()))
    dot = flow.explain("SELECT cust, COUNT(*) AS n FROM big GROUP BY cust", format="dot")
    assert "orders\\nInput" in dot and "Reduce" in dot and "peripheries=2" in dot
    assert len(list(flow.top.all_nodes())) == before
    assert "rows," not in dot  # a query's drawing has no state to show


def test_the_built_in_svg_has_a_box_per_operator_and_a_line_per_edge():
    flow, e_in = reach_flow()
    d = drawing(flow.top)
    root = ET.fromstring(to_svg(d, "reach"))
    rects = root.findall(f"{SVG}rect")
    assert len(rects) == len(d.nodes) + len(d.loops)
    assert len(root.findall(f"{SVG}line")) == len(d.edges)
    texts = {t.text for t in root.iter(f"{SVG}text")}
    assert {label[0] for _, label, _, _ in d.nodes} <= texts
    dashed = [ln for ln in root.findall(f"{SVG}line") if ln.get("stroke-dasharray")]
    assert len(dashed) == sum(1 for *_, back in d.edges if back) == 1
    # Every operator lies below all of its forward inputs.
    y = {}
    for rect, (nid, *_rest) in zip([r for r in rects if r.get("rx")], d.nodes):
        y[nid] = float(rect.get("y"))
    for a, b, back in d.edges:
        if not back:
            assert y[b] > y[a]


def test_draw_writes_the_format_its_suffix_names(tmp_path):
    flow, _ = reach_flow()
    assert open(flow.draw(str(tmp_path / "p.dot"))).read().startswith('digraph "reach"')
    ET.parse(flow.draw(str(tmp_path / "p.svg")))  # well-formed, whichever layout made it
    with pytest.raises(ddflow.UsageError, match="should end in"):
        flow.draw(str(tmp_path / "p.gif"))
    if graphviz() is None:
        with pytest.raises(ddflow.UsageError, match="Graphviz"):
            flow.draw(str(tmp_path / "p.png"))
    else:
        assert open(flow.draw(str(tmp_path / "p.png")), "rb").read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(graphviz() is None, reason="Graphviz's dot is not installed")
def test_graphviz_lays_out_what_we_emit():
    flow, _ = reach_flow()
    d = drawing(flow.top)
    svg = render(to_dot(d, "reach"), "svg").decode()
    root = ET.fromstring(svg)
    titles = {t.text for t in root.iter(f"{SVG}title")}
    assert {f"n{nid}" for nid, *_ in d.nodes} <= titles
