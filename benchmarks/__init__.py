"""The benchmark harness behind `ablate bench` (bench.py) and the peer implementations it measures against
(peers.py); docs/speed.md and the JSON files of docs/results/ are recorded runs."""
