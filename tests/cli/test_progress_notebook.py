"""Progress in a notebook: a real IPython kernel (ipykernel, driven through jupyter_client as Jupyter drives it; no
notebook server or browser is needed for what a cell's output receives) runs ``dal.write`` in a cell."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # starts a kernel process

REPO = Path(__file__).resolve().parents[2]


def run_cell(code: str, env: dict[str, str], cwd: Path) -> tuple[str, str, list[dict[str, Any]]]:
    """``code`` in a fresh kernel: its stdout, its stderr (as the notebook receives them) and its display data."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=120, env=env, cwd=str(cwd))
    out, err, shown = [], [], []

    def hook(msg: dict[str, Any]) -> None:
        kind, content = msg["header"]["msg_type"], msg["content"]
        if kind == "stream":
            (out if content["name"] == "stdout" else err).append(content["text"])
        elif kind in ("display_data", "update_display_data"):
            shown.append(content["data"])
        elif kind == "error":
            err.append("\n".join(content["traceback"]))

    try:
        reply = kc.execute_interactive(code, output_hook=hook, timeout=180)
        assert reply["content"]["status"] == "ok", "".join(err)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return "".join(out), "".join(err), shown


def test_a_write_in_a_notebook_cell_shows_a_tqdm_bar(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"DAL_PROGRESS", "VIRTUAL_ENV"}}
    env.update(PYTHONPATH=str(REPO), DAL_PROGRESS_DELAY="0", DAL_CATALOG_URL=f"sqlite:///{tmp_path}/c.db")
    code = (
        "import dal, dal.progress, pyarrow as pa\n"
        "print('notebook:', getattr(dal.progress, 'in_notebook', lambda: None)())\n"
        f"dal.write(pa.table({{'x': list(range(200_000))}}), 'nb.rows', path={str(tmp_path / 'rows')!r})\n"
        "print('rows:', dal.open('nb.rows').count())\n"
    )
    out, err, shown = run_cell(code, env, tmp_path)
    assert "rows: 200000" in out, out + err
    try:
        import ipywidgets  # noqa: F401
    except ImportError:  # tqdm's text bar on the cell's stderr, redrawn in place with carriage returns
        assert "\r" in err, err
        final = err.replace("\r", "\n").splitlines()
        done = [line for line in final if line.startswith("writing nb.rows: 100%")]
        assert done and "200000/200000" in done[-1] and "rows/s" in done[-1] and "1.5 MiB" in done[-1], err
        assert "Traceback" not in err and "Warning" not in err, err
    else:  # tqdm's widget: a display of a widget view
        assert any("application/vnd.jupyter.widget-view+json" in d for d in shown), shown
    assert "notebook: True" in out


def test_a_notebook_obeys_the_same_switches(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV"}}
    env.update(
        PYTHONPATH=str(REPO), DAL_PROGRESS_DELAY="0", DAL_PROGRESS="0", DAL_CATALOG_URL=f"sqlite:///{tmp_path}/c.db"
    )
    code = (
        "import dal, pyarrow as pa\n"
        f"dal.write(pa.table({{'x': list(range(1000))}}), 'nb.quiet', path={str(tmp_path / 'q')!r})\n"
        "print('done')\n"
    )
    out, err, shown = run_cell(code, env, tmp_path)
    assert "done" in out and err == "" and shown == [], (err, shown)


def test_outside_a_kernel_nothing_is_a_notebook() -> None:
    import dal.progress

    assert "ipykernel" not in sys.modules or not dal.progress.in_notebook()
