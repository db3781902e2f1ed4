"""``interactions serve CONFIG``: every interaction of a config as one OpenEnv environment.

See ``docs/serve.md`` for the protocol, the observation fields and the failure behaviour.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ._command import (
    Arg,
    Command,
    config_file,
    default_interaction,
    positive_int,
    positive_seconds,
    timeout,
)

if TYPE_CHECKING:
    import argparse

#: The environment variable holding the optional shared token.
TOKEN_VAR = "INTERACTIONS_SERVE_TOKEN"


def data_argument(text: str) -> tuple[str, str]:
    """``(split, path)`` of one ``--data`` argument, or argparse's one-line error."""
    import argparse

    from ..serve.hub import parse_data_argument

    try:
        return parse_data_argument(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


COMMAND = Command(
    "serve",
    help="serve a config's interactions as an OpenEnv environment",
    description="Serve every interaction of CONFIG as one OpenEnv environment (needs "
    "OpenEnv: the [openenv] extra, see docs/install.md). A client resets with prompt "
    "and interaction_kwargs (name, else the config's default:, plus the interaction's "
    "own arguments), then "
    "steps with {'content': <assistant message>}; each observation carries messages, "
    "feedback, turn, final_score, interaction, reward and done. Runs until SIGTERM or "
    f"Ctrl-C, finalizing open sessions. Set {TOKEN_VAR} to require a shared token. "
    "With --data, the rows of a dataset are served through OpenEnv's Task API and a "
    "client resets with split and index instead.",
    arguments=[
        config_file("interactions config (YAML)"),
        Arg(
            "--data",
            action="append",
            default=[],
            type=data_argument,
            metavar="[NAME=]FILE",
            help="serve the rows of FILE (JSONL, or parquet with pyarrow; the rows of "
            "interactions run --data) as split NAME (default: the file's stem) through "
            "OpenEnv's Task API; reset(split=NAME, index=i) plays row i; repeatable",
        ),
        Arg(
            "--host",
            default="127.0.0.1",
            help="address to listen on (default 127.0.0.1: this machine only)",
        ),
        Arg("--port", type=int, default=8000, metavar="N", help="port (default 8000; 0: any free)"),
        Arg(
            "--max-sessions",
            type=positive_int,
            default=64,
            metavar="N",
            help="episodes open at once (default 64); a reset beyond gets a capacity error",
        ),
        Arg(
            "--max-turns",
            type=positive_int,
            metavar="N",
            help="end an episode after N assistant turns (default: when the interaction says so)",
        ),
        Arg(
            "--max-user-turns",
            type=positive_int,
            metavar="N",
            help="end an episode once N feedback messages were appended (default: no limit)",
        ),
        Arg(
            "--max-episode-chars",
            type=positive_int,
            metavar="N",
            help="the most characters one observation may carry: the episode's whole "
            "conversation and the step's feedback (a longer prompt is refused; an answer or "
            "a plugin's feedback past it ends the episode; default: 2,000,000)",
        ),
        Arg(
            "--rewards",
            default="turn",
            choices=("turn", "final"),
            help="each step's reward: turn (default), the turn's score; final, 0 until the "
            "last step, whose reward is the episode's score (for clients that sum rewards)",
        ),
        timeout("a timeout ends that episode with an error"),
        default_interaction("resets"),
        Arg(
            "--allow-origin",
            action="append",
            default=[],
            metavar="ORIGIN",
            help="let web pages from ORIGIN (https://host:port; * for any) connect; repeatable "
            "(default: only clients that send no Origin, and the server's own origin)",
        ),
        Arg(
            "--max-connections",
            type=positive_int,
            metavar="N",
            help="WebSocket connections open at once, authenticated or not (default: twice "
            "--max-sessions); a session is taken only by a reset that passed the token check",
        ),
        Arg(
            "--ws-compression",
            action="store_true",
            help="compress WebSocket messages (permessage-deflate): fewer bytes for "
            "clients on slow links, more CPU per step; off by default",
        ),
        Arg(
            "--idle-timeout",
            type=positive_seconds,
            default=300.0,
            metavar="S",
            help="close a WebSocket that sends nothing for S seconds, ending its episode "
            "(default 300)",
        ),
        Arg(
            "--header-timeout",
            type=positive_seconds,
            default=10.0,
            metavar="S",
            help="close an HTTP connection that has not sent a complete request (head, "
            "then body) within S seconds (default 10)",
        ),
        Arg(
            "--log-level",
            default="info",
            choices=("critical", "error", "warning", "info", "debug"),
            help="server log level (default info)",
        ),
    ],
)


def _require_openenv() -> None:
    import importlib.util

    from ..errors import InteractionsError

    missing = [m for m in ("openenv", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise InteractionsError(
            f"interactions serve needs {' and '.join(missing)}, which {verb} not installed: "
            "pip install 'openenv>=0.10' 'uvicorn>=0.24' (what the [openenv] extra installs; "
            "see docs/install.md)"
        )


def is_loopback(host: str) -> bool:
    """True when ``host`` can only be reached from this machine."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_warning(host: str, token: str | None) -> str | None:
    """The warning to print when listening on ``host`` exposes the server, else ``None``."""
    if is_loopback(host):
        return None
    guard = (
        f"a reset must bring the shared token from {TOKEN_VAR}"
        if token
        else f"there is no authentication: anyone who can connect runs episodes (set "
        f"{TOKEN_VAR} to require a shared token, or keep the default --host 127.0.0.1)"
    )
    return f"listening on {host}, reachable from other machines; {guard}. Traffic is not encrypted."


def run(args: argparse.Namespace) -> int:
    import os

    from ..errors import InteractionsError

    if not 0 <= args.port <= 65535:
        raise InteractionsError(f"--port must be between 0 and 65535, not {args.port}")
    token = os.environ.get(TOKEN_VAR) or None
    if token is not None and token != token.strip():
        # HTTP strips a header value's ends: no client could send it to the Task API
        raise InteractionsError(
            f"{TOKEN_VAR} begins or ends with whitespace (a secret file's last newline?); "
            f"no HTTP client can send it: set it without, e.g. {TOKEN_VAR}=$(cat FILE)"
        )
    _require_openenv()
    from ..serve.hub import MAX_EPISODE_CHARS, Hub, Tasks

    hub = Hub.from_config(
        args.config,
        default=args.default_interaction,
        max_sessions=args.max_sessions,
        max_turns=args.max_turns,
        max_user_turns=args.max_user_turns,
        max_episode_chars=args.max_episode_chars or MAX_EPISODE_CHARS,
        timeout=args.timeout,
        token=token,
        rewards=args.rewards,
    )
    if args.data:  # read before OpenEnv is imported: a bad file is an error in seconds
        import functools

        from ..serve.episode import playable

        hub.tasks = Tasks.load(args.data, hub, check=functools.partial(playable, hub))
    from ..serve.app import run as serve

    warning = host_warning(args.host, token)
    if warning:
        sys.stderr.write(f"interactions: warning: {warning}\n")
    guard = {
        "allowed_origins": args.allow_origin,
        "idle_timeout": args.idle_timeout,
        "head_timeout": args.header_timeout,
    }
    if args.max_connections:
        guard["max_connections"] = args.max_connections
    serve(hub, args.host, args.port, args.log_level, compress=args.ws_compression, **guard)
    return 0
