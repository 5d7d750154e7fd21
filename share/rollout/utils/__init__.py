"""The workspace's commands (see SKILL.md): python3 -m utils.verification, python3 -m utils.profiling."""
