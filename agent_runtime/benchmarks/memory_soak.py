"""`bench memory`: a long headless run (consecutive episodes on one runtime) sampling pool and process memory.

Blocks leave the views in whole units and are freed, so used KV pages and RSS must stay flat.
"""

import gc
from pathlib import Path

import psutil

from agent_runtime.benchmarks.measure import progress, save_figure, subplots
from agent_runtime.session.llm_episode import run_llm_episode


def run_memory_soak(env, runtime, *, frames: int, fixed_cost=None) -> dict:
    process = psutil.Process()
    samples: list[tuple[int, int, int, float]] = []  # (frames so far, used pages, blocks, rss MB)
    done = 0

    def sample(*_):
        gc.collect()
        samples.append((done, runtime.store.used_pages, len(runtime.store.blocks), process.memory_info().rss / 2**20))

    episodes = 0
    while done < frames:
        result = run_llm_episode(env, runtime, fixed_cost=fixed_cost, progress=sample, seed=episodes)
        done += result["frames_prefilled"]
        episodes += 1
        sample()
        progress(f"{done}/{frames} frames, {episodes} episodes, pool {runtime.store.used_pages} pages, "
                 f"rss {samples[-1][3]:.0f} MB", done=min(done, frames))
    quarter = max(1, len(samples) // 4)
    early, late = samples[quarter: 2 * quarter], samples[-quarter:]
    return {
        "frames": done, "episodes": episodes, "pool_capacity_pages": runtime.store.num_pages,
        "pool_peak_pages": max(s[1] for s in samples), "blocks_peak": max(s[2] for s in samples),
        "rss_mb_early": max(s[3] for s in early), "rss_mb_late": max(s[3] for s in late),
        "rss_growth_mb": max(s[3] for s in late) - max(s[3] for s in early), "_samples": samples,
    }


def plot_memory(samples, path: Path, title: str) -> None:
    frames = [s[0] for s in samples]
    fig, ax1 = subplots(figsize=(7, 3.6), dpi=120)
    ax1.plot(frames, [s[1] for s in samples], color="tab:blue", lw=1, label="KV pages in use")
    ax1.set_xlabel("frames prefilled")
    ax1.set_ylabel("KV pages in use", color="tab:blue")
    ax2 = ax1.twinx()
    ax2.plot(frames, [s[3] for s in samples], color="tab:red", lw=1, label="process RSS")
    ax2.set_ylabel("RSS (MB)", color="tab:red")
    ax2.set_ylim(0, max(s[3] for s in samples) * 1.2)
    ax1.set_title(title, fontsize=10)
    save_figure(fig, path)
