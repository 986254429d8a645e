// The bar over the task tree while episodes are ticked: how many (and how many of them the
// tree does not show now: filing takes them too), filing them into a set picked by name (the
// same picker and confirmation as "add all matching"), and clear.
import { AddToSet } from "./AddToSet";

export function SelectionBar({ episodes, hidden, onClear }: { episodes: string[]; hidden: number; onClear: () => void }) {
  return (
    <div className="bulk-add selection-bar" role="group" aria-label="selected episodes" data-testid="selection-bar">
      <span role="status">
        {episodes.length} selected
        {hidden > 0 && <span className="muted" data-testid="ticked-hidden" title="their task is closed, or the filters leave them out; they are filed too"> ({hidden} not shown)</span>}
      </span>
      <AddToSet
        count={episodes.length}
        episodes={{ episode_ids: episodes }}
        pickLabel="set to add the selected episodes to"
        placeholder="add to set…"
        why="The selected episodes are filed into the set"
        onAdded={onClear}
      />
      <button type="button" className="link" onClick={onClear}>
        clear
      </button>
    </div>
  );
}
