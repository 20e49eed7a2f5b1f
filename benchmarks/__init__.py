"""The benchmark harness behind `ablate bench` (bench.py) and the peer implementations it measures against
(peers.py); RESULTS.md and the JSON files are recorded runs."""
