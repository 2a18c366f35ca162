"""Draws docs/architecture.png: the path of one frame and of one spoken command (see docs/architecture.md).

Run: nice -n 19 .venv/bin/python docs/draw_architecture.py
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

FRAME, VOICE, BUMP = "#dbeafe", "#dcfce7", "#fee2e2"
X = [1.3, 3.8, 6.3, 8.8, 11.3, 13.8, 16.3]  # the seven columns
W, H = 1.95, 1.1

fig, ax = plt.subplots(figsize=(18, 10.5))
ax.set_xlim(0, 17.6)
ax.set_ylim(-0.2, 10.3)
ax.axis("off")


def box(x, y, title, files, color, w=W, h=H):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.04", fc=color, ec="#334155"))
    ax.text(x, y + 0.17, title, ha="center", va="center", fontsize=10, weight="bold")
    ax.text(x, y - 0.27, files, ha="center", va="center", fontsize=8, family="monospace", color="#1e3a8a")


def arrow(p, q, label="", at=None, rad=0.0, color="#0f172a", ls="-", ha="center"):
    """An arrow p -> q; its label at `at` (default: the midpoint)."""
    ax.annotate("", q, p, arrowprops=dict(arrowstyle="-|>", lw=1.5, color=color, ls=ls,
                                          connectionstyle=f"arc3,rad={rad}", shrinkA=0, shrinkB=0))
    if label:
        x, y = at or ((p[0] + q[0]) / 2, (p[1] + q[1]) / 2)
        ax.text(x, y, label, ha=ha, va="center", fontsize=7.6, color=color,
                bbox=dict(fc="white", ec="none", pad=0.5, alpha=0.85))


def row(y, boxes, labels, color):
    for x, (title, files) in zip(X, boxes):
        box(x, y, title, files, color)
    for i, label in enumerate(labels):
        mid = (X[i] + X[i + 1]) / 2  # the label sits in the gap, under the arrow
        arrow((X[i] + W / 2, y), (X[i + 1] - W / 2, y), label, at=(mid, y - H / 2 - 0.3))


# ONE FRAME
fy = 8.2
ax.text(0.2, 9.95, "ONE FRAME", fontsize=13, weight="bold", color="#1d4ed8")
row(fy, [("ViZDoom", "envs/doom_env.py"), ("world", "session/sync_world.py\nsession/live_session.py"),
         ("FrameStream block", "engine/streams/frames.py"), ("scheduler", "engine/scheduler.py"),
         ("batched forward", "engine/model_runner.py\nattention_kernels/"), ("ActionStream", "engine/streams/action.py"),
         ("executor: fence", "control/action_executor.py")],
    ["Frame", "TimedFrame\n(read_ms)", "newest, within\nmax_frame_age", "rows: frame,\ntext, decoders",
     "logits (per-block\nattention merged)", "Action(gen,\nframe)"], FRAME)
arrow((X[6], fy + H / 2), (X[1], fy + H / 2), "world.hold(buttons, tics)   —   stale generation or frame age: fenced, never run",
      at=(8.8, 9.5), rad=0.12, color="#1d4ed8")

# ONE SPOKEN COMMAND
vy = 4.3
ax.text(0.2, 5.55, "ONE SPOKEN COMMAND", fontsize=13, weight="bold", color="#15803d")
row(vy, [("mic", "voice/audio_io.py\nvoice/voice_io.py"), ("VAD", "voice/vad.py"),
         ("recognizer", "voice/recognizer.py"), ("barge-in", "voice/barge_in.py"),
         ("user_inputs", "control/user_inputs.py"), ("session loop", "session/session_loop.py"),
         ("direct action", "push_user_text()")],
    ["32 ms blocks\n(listener thread)", "speech +\npre-roll", "Hypothesis\n(command)", "VoiceCommand\n(queued)",
     "UserInput(text,\ncommand)", "command on\nnewest frame"], VOICE)
box(X[3], 6.1, "engine user stream", "engine/streams/text_in.py", VOICE, w=2.4, h=0.9)
arrow((X[5] - 0.4, vy + H / 2), (X[3] + 1.2, 6.1), "text")
arrow((X[3], 6.55), (X[3], fy - H / 2), "'user' section, same forward",
      at=(8.95, 6.85), color="#15803d", ls="--", ha="left")
arrow((X[6], vy + H / 2), (X[6], fy - H / 2), "new generation,\nnever age-fenced", color="#15803d", ls="--")

# ONE INTERRUPTION: the generation bump, delivered in order
by = 1.9
ax.text(0.2, 2.75, "INTERRUPTION", fontsize=13, weight="bold", color="#b91c1c")
box(X[3], by, "generation.bump()", "session/generation.py", BUMP)
for i, (title, files) in enumerate([("1 engine", "engine/multistream_agent.py"), ("2 TTS", "voice/tts.py"),
                                    ("3 playback", "voice/playback.py")]):
    box(X[4 + i], 0.55, title, files, BUMP, h=0.95)
    arrow((X[3] + W / 2, by - 0.2), (X[4 + i] - 0.5, 0.55 + 0.48), color="#b91c1c")
arrow((X[3], vy - H / 2), (X[3], by + H / 2), "confirmed barge-in:\nbump FIRST", at=(X[3] + 0.1, 3.05),
      color="#b91c1c", ha="left")
arrow((X[5] - 0.5, vy - H / 2), (X[3] + W / 2, by + 0.3), "push_user_text(): bump", color="#b91c1c")
arrow((X[6] + 0.3, 0.55 + 0.48), (X[5] + 0.7, vy - H / 2), "heard text → commit_heard", color="#64748b", ls="--")
ax.text(0.2, 0.3, "executor: no callback; it compares the\naction's stamp when it runs (fence)",
        fontsize=8.5, color="#b91c1c")
ax.text(0.2, 1.2, "every stamped item (action, remark, TTS chunk,\nplayback buffer) is checked where it is consumed",
        fontsize=8.5, color="#b91c1c")

out = Path(__file__).resolve().parent / "architecture.png"
fig.savefig(out, dpi=110, bbox_inches="tight")
print(out)
