"""Discovery at scale: listing with 20, 200 and 1,000 installed distributions.

Each environment is a folder of generated ``*.dist-info`` folders put on
``sys.path`` through ``PYTHONPATH`` (on top of whatever the interpreter's own
environment holds). Every tenth distribution declares a console script, and
three declare an interaction, so the scan has entry points to read and a few
records to build.

* **warm**: ``interactions list`` with a valid index cache in the 1,000 and the
  20 environment, alternately. Goal: the 1,000 one at most 1.1x the 20 one (the
  warm path must not depend on how much is installed).
* **cold**: ``interactions list`` with a fresh cache (the cache folder is
  removed before every run, so the scan and the index write both happen)
  against a bare ``importlib.metadata`` scan of the core's group in the same
  environment, with the host's hook plugins disabled. Goal: at most 1.3x at
  1,000 distributions (the index is written with ``hashlib`` and ``json``, and
  little else is added to the scan itself); at 20 and 200 the ratio is reported,
  since there the interpreter's start-up, not the scan, is most of either side.
* **after an unrelated install**: the host's hook plugins enabled (the
  reasoning-gym suite, whose hook imports reasoning-gym), their names learned
  once; then before every run one more unrelated distribution is installed,
  so the index is rebuilt from metadata each time. What the hook plugins
  registered is keyed on their own distributions, so they are not run again.
  Goal: at most 1.2x the bare scan.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from _common import PYTHON, Row, alternate, clean_env, interactions_command, run_once, scratch

SIZES = (20, 200, 1000)
#: The size the cold goal is set at; the smaller ones are reported.
COLD_GOAL_SIZE = 1000
WARM_GOAL = 1.1
COLD_GOAL = 1.3
AFTER_INSTALL_GOAL = 1.2
WITH_INTERACTIONS = 3
REPRODUCE = "python benchmarks/run.py --only discovery"
HOOKS_GROUP = "interactions_core.plugins"
WARM = "Discovery, warm: `list` with 1,000 dists / with 20"
COLD = "Discovery, cold, {size:,} dists: `list` / bare `entry_points()` scan"
AFTER_INSTALL = (
    "Discovery, right after an unrelated install, hook plugins enabled: `list` / bare scan"
)
FIRST_LEARN = "Discovery, no cache at all, 20 dists, hook plugins enabled: `list` / bare scan"
#: The rows this module reports, in order (the docs' table is checked against them).
ROWS = (WARM, *(COLD.format(size=size) for size in SIZES), AFTER_INSTALL, FIRST_LEARN)
BARE_SCAN = "import importlib.metadata as m; m.entry_points(group='interactions_core.interactions')"


def make_environment(root: Path, size: int) -> Path:
    """A folder with ``size`` generated distributions; returns it."""
    site = root / f"site-{size}"
    site.mkdir(parents=True)
    step = max(1, size // WITH_INTERACTIONS)
    for i in range(size):
        name = f"benchdist-{i:04d}"
        info = site / f"benchdist_{i:04d}-1.{i}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.{i}\n"
            f"Summary: generated distribution {i}\nRequires-Python: >=3.10\n"
            "Classifier: Programming Language :: Python :: 3\n\nA long description.\n"
        )
        lines = []
        if i % 10 == 0:
            lines += ["[console_scripts]", f"benchtool-{i} = benchmod_{i}.cli:main", ""]
        if i % step == 0 and i // step < WITH_INTERACTIONS:
            lines += [
                "[interactions_core.interactions]",
                f"bench{i} = benchmod_{i}.interaction:BenchInteraction",
                "",
            ]
        if lines:
            (info / "entry_points.txt").write_text("\n".join(lines))
        (info / "RECORD").write_text("")
    return site


def install_unrelated(site: Path, serial: list[int]) -> None:
    """Install one more distribution that has nothing to do with interactions."""
    serial[0] += 1
    info = site / f"unrelated_{serial[0]:05d}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: unrelated-{serial[0]}\n")
    (info / "RECORD").write_text("")


def host_hook_plugins() -> list[str]:
    """Distributions of this interpreter that provide hook plugins."""
    from importlib.metadata import entry_points

    return sorted({ep.dist.name for ep in entry_points(group=HOOKS_GROUP) if ep.dist})


def run(repeats: int) -> list[Row]:
    root = scratch("discovery")
    cli = [*interactions_command(), "list"]
    hooks = host_hook_plugins()
    # A cold listing also imports every hook plugin whose registrations are not
    # cached yet: that is the plugin's own import time, not the scan's. The scan
    # rows disable the host's hook plugins; one more row shows their cost.
    no_hooks = {"INTERACTIONS_DISABLE": ",".join(hooks)} if hooks else {}
    envs = {}
    for size in SIZES:
        site = make_environment(root, size)
        cache = root / f"cache-{size}"
        env = clean_env(PYTHONPATH=str(site), XDG_CACHE_HOME=str(cache), **no_hooks)
        envs[size] = (env, cache)
        run_once(cli, env)  # warm this environment's index

    rows = []
    warm = alternate(cli, cli, repeats=repeats, env_a=envs[1000][0], env_b=envs[20][0])
    rows.append(
        Row.at_most(
            WARM,
            WARM_GOAL,
            warm.ratio,
            warm.describe("1,000", "20"),
            REPRODUCE,
        )
    )
    for size in SIZES:
        env, cache = envs[size]

        def stale(cache: Path = cache) -> None:
            shutil.rmtree(cache, ignore_errors=True)

        cold = alternate(cli, [PYTHON, "-c", BARE_SCAN], repeats=repeats, env_a=env, before_a=stale)
        title, detail = COLD.format(size=size), cold.describe("list", "scan")
        if size == COLD_GOAL_SIZE:
            rows.append(Row.at_most(title, COLD_GOAL, cold.ratio, detail, REPRODUCE))
        else:
            rows.append(Row.report(title, cold.ratio, detail, REPRODUCE))
    if hooks:
        rows.append(after_install_row(root, cli, hooks, repeats))
        rows.append(first_learn_row(envs[20], cli, hooks, max(3, repeats // 8)))
    else:
        why = "not measured: this interpreter has no hook plugin installed"
        rows.append(Row.skipped(AFTER_INSTALL, f"<= {AFTER_INSTALL_GOAL:.2f}x", why, REPRODUCE))
        rows.append(Row.skipped(FIRST_LEARN, "report", why, REPRODUCE))
    shutil.rmtree(root, ignore_errors=True)
    return rows


def after_install_row(root: Path, cli: list[str], hooks: list[str], repeats: int) -> Row:
    """``list`` right after an unrelated install, hook plugins enabled and already known."""
    site = make_environment(root / "after-install", 20)
    env = clean_env(PYTHONPATH=str(site), XDG_CACHE_HOME=str(root / "after-install-cache"))
    run_once(cli, env)  # the one time the hook plugins are asked what they register
    serial = [0]
    timed = alternate(
        cli,
        [PYTHON, "-c", BARE_SCAN],
        repeats=repeats,
        env_a=env,
        before_a=lambda: install_unrelated(site, serial),
    )
    return Row.at_most(
        AFTER_INSTALL,
        AFTER_INSTALL_GOAL,
        timed.ratio,
        timed.describe("list", "scan")
        + f"; hook plugins: {', '.join(hooks)}; the index is rebuilt, they are not run again",
        REPRODUCE,
    )


def first_learn_row(
    env_cache: tuple[dict[str, str], Path], cli: list[str], hooks: list[str], repeats: int
) -> Row:
    """``list`` with no cache at all, hook plugins enabled: they must be asked (reported)."""
    env, cache = env_cache
    env = {k: v for k, v in env.items() if k != "INTERACTIONS_DISABLE"}

    def empty() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    timed = alternate(cli, [PYTHON, "-c", BARE_SCAN], repeats=repeats, env_a=env, before_a=empty)
    return Row(
        FIRST_LEARN,
        "report",
        timed.ratio,
        None,
        timed.describe("list", "scan")
        + f"; hook plugins: {', '.join(hooks)}; the difference is their own import time, "
        "paid once per install or upgrade of them",
        REPRODUCE,
    )
