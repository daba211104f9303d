"""The roadmap's reachability program in ddflow: load a graph, then watch output changes per update.

    python examples/reachability.py
"""
import ddflow

flow = ddflow.Dataflow()
roots_in, roots = flow.new_collection("roots")
edges_in, edges = flow.new_collection("edges")

# (node, root): node is reachable from root.  Records are keyed by their first field,
# so `reach.join(edges)` matches a reached node with the edges leaving it.
start = roots.project(0, 0)
reach = start.iterate(lambda reach: reach.join(edges).project(2, 1).concat(start).distinct(), name="reach")
out = reach.capture()

roots_in.insert((0,), time=0)
edges_in.update([(0, 1), (1, 2), (2, 3), (3, 4)], times=0)
flow.advance_to(1)
flow.run()
print("initial:", sorted(r for r, _, _ in out.drain()))

# Each change at its own data time; one frontier advance retires all of them.
edges_in.remove((1, 2), time=1)   # cut the chain
edges_in.insert((0, 3), time=2)   # a shortcut around the cut
edges_in.insert((4, 0), time=3)   # a cycle back to the root
flow.advance_to(4)
flow.run()
for row, t, diff in out.drain():
    print(f"time {t}: {'+' if diff > 0 else '-'} {row}")
