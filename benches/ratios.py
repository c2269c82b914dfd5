#!/usr/bin/env python3
"""Prints crate/raw median ratios from criterion's results (target/criterion).

Run after `cargo bench --bench decode`.
"""
import json
import pathlib
import sys

TARGETS = {"decode": 1.05}
root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")


def median_ns(group: pathlib.Path, side: str) -> float:
    estimates = json.loads((group / side / "new" / "estimates.json").read_text())
    return estimates["median"]["point_estimate"]


print("| bench | crate median | raw median | ratio | target | met |")
print("| --- | --- | --- | --- | --- | --- |")
for group in sorted(p for p in root.iterdir() if (p / "crate").is_dir() and (p / "raw").is_dir()):
    crate, raw = median_ns(group, "crate"), median_ns(group, "raw")
    target = next(t for prefix, t in TARGETS.items() if group.name.startswith(prefix))
    ratio = crate / raw
    print(
        f"| {group.name} | {crate / 1000:.1f} µs | {raw / 1000:.1f} µs | {ratio:.3f} | "
        f"<= {target} | {'yes' if ratio <= target else 'NO'} |"
    )
