"""The agent's sections of blocks (system, user, commentary, thoughts, actions, status, frames, history), their caps,
and the views that follow them.

The only code that changes a section: a section holds one reference to each of its blocks; past its cap the
oldest block leaves it and is released. Every change re-syncs each following view to its ordered selection of
the sections, so a stream never syncs views itself. A block leaving every view is freed without recompute.
"""

from agent_runtime.engine.kv_block_store import Block, KVBlockStore
from agent_runtime.engine.view import View

SECTION_NAMES = ("system", "user", "commentary", "thoughts", "actions", "status", "frames", "history")
# history: the frames again, kept longer for the Thinker alone (budgets.thinker_frames_in_view); empty without it

Selection = list[tuple[str, "int | None"]]  # (section name, how many newest blocks; None = all), in view order


class BlockSections:
    def __init__(self, store: KVBlockStore, caps: dict[str, int]):
        self.store, self.caps = store, caps
        self._blocks: dict[str, list[Block]] = {name: [] for name in SECTION_NAMES}
        self._followers: list[tuple[View, Selection]] = []

    def __getitem__(self, name: str) -> list[Block]:
        return list(self._blocks[name])

    def add(self, name: str, block: Block) -> None:
        """The block joins the section with the caller's hold; past its cap, the oldest leave it (released)."""
        blocks = self._blocks[name]
        blocks.append(block)
        while len(blocks) > self.caps[name]:
            self.store.release(blocks.pop(0))
        self._changed()

    def drop_oldest(self, name: str) -> Block:
        """The section's oldest block leaves it (released)."""
        block = self._blocks[name].pop(0)
        self.store.release(block)
        self._changed()
        return block

    def clear(self, name: str) -> None:
        while self._blocks[name]:
            self.store.release(self._blocks[name].pop(0))
        self._changed()

    def follow(self, view: View, selection: Selection) -> None:
        """From now on `view` reads, in order, its selection of the sections."""
        self._followers.append((view, selection))
        self._sync(view, selection)

    def _changed(self) -> None:
        for view, selection in self._followers:
            self._sync(view, selection)

    def _sync(self, view: View, selection: Selection) -> None:
        """Make `view` read its selection: retains what is new and releases what left."""
        want: list[Block] = []
        for name, newest in selection:
            blocks = self._blocks[name]
            want += blocks if newest is None else blocks[-newest:] if newest > 0 else []
        if [id(b) for b in want] == [id(b) for b in view.blocks]:
            return
        for b in want:
            self.store.retain(b)
        for b in view.blocks:
            self.store.release(b)
        view.blocks = want

    def stop_following(self) -> None:
        """The views close on their own from here on (the agent is closing): no change syncs them again."""
        self._followers = []

    def release_all(self) -> None:
        """Every section's blocks are released, in section order (the views stopped following first)."""
        self.stop_following()
        for name in SECTION_NAMES:
            self.clear(name)  # no view follows any more: only the release
