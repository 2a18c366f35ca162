"""One result schema for every session, headless or live, whoever plays: the keys every command prints."""

from __future__ import annotations

AGENT_COUNTS = ("frames_dropped", "frames_prefilled", "thinker_tokens", "thinker_paragraphs", "decisions",
                "decisions_abandoned", "joint_decode_steps", "remarks_started", "remarks_stopped", "heard_commits")


def session_result(world, executor, agent, totals, *, store=None) -> dict:
    """Reward, kills and tics of the (last) episode, the executor's actions and reaction times, the agent's counts
    (0 where an agent has no such stream), session time and the KV pool's peak use."""
    stats = agent.stats
    session_ms = world.clock.now_ms
    return {
        "reward": round(world.reward, 4),
        "kills": world.env.kills,
        "tics": totals.end_tic - totals.start_tic,
        "episodes": totals.episodes,
        **executor.stats.summary(),
        **{key: getattr(stats, key, 0) for key in AGENT_COUNTS},
        "engine_steps": getattr(stats, "steps", 0),
        "user_actions": totals.user_actions,
        "session_ms": session_ms,
        "seconds": session_ms / 1000.0,
        "clock": world.clock.name,
        "pool_peak_pages": totals.pool_peak_pages,
        "pool_capacity_pages": store.num_pages if store is not None else None,
    }
