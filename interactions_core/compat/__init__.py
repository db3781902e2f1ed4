"""Compatibility with trainers' older APIs and this project's older import paths.

:mod:`interactions_core.compat.verl` is the drop-in for verl up to 0.7's
interaction loader. ``compat.verl_agent_loop`` and ``compat.trl`` are aliases of
:mod:`interactions_core.integrations.verl` and :mod:`interactions_core.integrations.trl`,
kept so that existing configs and scripts keep working.
"""
