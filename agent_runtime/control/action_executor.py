"""The action executor: runs an action when it is due, unless it has gone stale.

An action whose generation moved on (the user interrupted) or whose frame is older than max_action_age is
fenced (dropped and counted), never executed late: late play is worse than none.
"""

from dataclasses import dataclass, field

from agent_runtime.control.action_grammar import Command
from agent_runtime.session.events import Kind
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.session.time_bounds import TimeBounds
from agent_runtime.percentiles import percentile


@dataclass
class Action:
    command: Command
    generation: int
    frame_tic: int
    frame_read_ms: float  # session time when the conditioning frame was read
    emitted_ms: float
    source: str = "action"  # "action" stream, "user" command, or a baseline's name


@dataclass
class ExecutorStats:
    executed: int = 0
    fenced_generation: int = 0
    fenced_age: int = 0
    reaction_ms: list[float] = field(default_factory=list)
    first_executed_ms: float | None = None

    def summary(self) -> dict:
        """The per-episode result keys every agent reports."""
        return {
            "actions_executed": self.executed,
            "actions_fenced": self.fenced_generation + self.fenced_age,
            "actions_fenced_generation": self.fenced_generation,
            "actions_fenced_age": self.fenced_age,
            **{f"reaction_ms_p{q}": percentile(self.reaction_ms, q) for q in (50, 95, 99)},
            "first_action_ms": self.first_executed_ms,
            "reaction_samples_ms": [round(x, 2) for x in self.reaction_ms],
        }


class ActionExecutor:
    def __init__(self, world, generation: SessionGeneration, bounds: TimeBounds, *, bus=None):
        """bus: where executed and fenced actions are recorded (None: nowhere)."""
        self.world, self.generation, self.bounds, self.bus = world, generation, bounds, bus
        self.stats = ExecutorStats()

    def execute(self, action: Action, now_ms: float) -> bool:
        """Run the action now if it is still current and fresh; otherwise fence it. Returns whether it ran."""
        age = now_ms - action.frame_read_ms
        reason = None
        if not self.generation.is_current(action.generation):
            reason = "generation"
            self.stats.fenced_generation += 1
        elif self.bounds.action_stale(action.frame_read_ms, now_ms):
            reason = "frame_age"
            self.stats.fenced_age += 1
        if reason is not None:
            self._emit(Kind.ACTION_FENCED, action, now_ms, reason=reason, frame_age_ms=age)
            return False
        self.world.hold(action.command.buttons, action.command.tics)
        self.stats.executed += 1
        if self.stats.first_executed_ms is None:
            self.stats.first_executed_ms = now_ms
        self.stats.reaction_ms.append(age)
        self._emit(Kind.ACTION_EXECUTED, action, now_ms, frame_age_ms=age)
        return True

    def _emit(self, kind: str, action: Action, now_ms: float, **extra) -> None:
        if self.bus is not None:
            self.bus.emit(kind, action.source, generation=action.generation, tic=self.world.tic, sim_ms=now_ms,
                          command=action.command.text, frame_tic=action.frame_tic, **extra)
