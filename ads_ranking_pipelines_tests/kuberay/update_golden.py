"""Regenerate the golden manifests (a command, not a test):

    .venv/bin/python -m ads_ranking_pipelines_tests.kuberay.update_golden

Writes ``golden/<case>.<kind>.yaml`` for every case, removes files no case renders, and
prints what changed. Review ``git diff`` before committing; the tests compare only.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ads_ranking_pipelines_tests.kuberay.cases import CASES
from ads_ranking_pipelines_tests.kuberay.golden import GOLDEN_DIR, KINDS, dump, golden_path, render


def write_all(golden_dir: Path = GOLDEN_DIR) -> list[str]:
    """Write every golden file into ``golden_dir``; the names of those that changed (or were
    removed), sorted."""
    golden_dir.mkdir(parents=True, exist_ok=True)
    changed, expected = [], set()
    for case in CASES:
        rendered = render(case)
        for kind in KINDS:
            path = golden_path(case, kind, golden_dir)
            expected.add(path.name)
            text = dump(rendered[kind])
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
                changed.append(path.name)
    for orphan in golden_dir.glob("*.yaml"):
        if orphan.name not in expected:
            orphan.unlink()
            changed.append(orphan.name)
    return sorted(changed)


def main() -> int:
    changed = write_all()
    for name in changed:
        print(f"rewrote {GOLDEN_DIR / name}")
    print(f"{len(changed)} golden file(s) changed; review `git diff` before committing"
          if changed else "golden files already match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
