"""bench/key_skew.py routes keys to subtasks as Flink's own KeyGroupRangeAssignment does
(the benchmark's explanation of the workload's ceiling at 8 stands on it): checked
against the pinned Flink's classes, run by `java` on its flink-dist jar."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from bench.key_skew import keys_per_subtask, subtask_of
from services.localstack.flinkdist import dist_jar, flink_home
from services.localstack.layout import cache_dir

KEYS = [f"k{n}" for n in range(300)] + ["", "scalefold", "ünïcode", "a-much-longer-key-42"]
SHAPES = [(8, p) for p in range(1, 9)] + [(128, 3), (128, 100), (32_768, 7)]

ROUTE = """
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import java.nio.file.*;
public class Route {
    public static void main(String[] args) throws Exception {
        var keys = Files.readAllLines(Path.of(args[0]));
        var out = new StringBuilder();
        for (int i = 1; i < args.length; i += 2) {
            int max = Integer.parseInt(args[i]), p = Integer.parseInt(args[i + 1]);
            for (String key : keys) {
                out.append(KeyGroupRangeAssignment.assignKeyToParallelOperator(key, max, p));
                out.append('\\n');
            }
        }
        System.out.print(out);
    }
}
"""


def test_keys_go_to_the_subtasks_flink_routes_them_to(tmp_path: Path) -> None:
    source, keys = tmp_path / "Route.java", tmp_path / "keys.txt"
    source.write_text(ROUTE)
    keys.write_text("\n".join(KEYS) + "\n", encoding="utf-8")
    jar = dist_jar(flink_home(cache_dir(os.environ)))
    shapes = [str(n) for shape in SHAPES for n in shape]
    java = ["java", "-Dfile.encoding=UTF-8", "-cp", str(jar), str(source), str(keys), *shapes]
    done = subprocess.run(java, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    flink = [int(line) for line in done.stdout.split()]
    ours = [subtask_of(key, m, p) for m, p in SHAPES for key in KEYS]
    assert ours == flink


def test_the_workloads_64_keys_leave_its_busiest_subtask_15_of_them_at_8() -> None:
    held = keys_per_subtask(64, 8, 8)
    assert sum(held) == 64
    assert sorted(held, reverse=True) == [15, 11, 11, 10, 5, 5, 4, 3]
