// An episode's tick box in a list that files episodes together (the task tree, a set's
// members). A shift-click (or Shift+Space) ticks the range from the last ticked (see
// selection.ts); `onTick` gets whether the shift key was down.
import type { Ticked } from "./selection";

export function TickBox({ episode, ticked, onTick }: { episode: string; ticked: Ticked; onTick: (episode: string, shift: boolean) => void }) {
  return (
    <input
      type="checkbox"
      className="tick"
      data-tick={episode}
      checked={ticked.ids.has(episode)}
      // a checkbox's change comes from its click, which carries the shift key
      onChange={(e) => onTick(episode, (e.nativeEvent as MouseEvent).shiftKey === true)}
      aria-label={`select ${episode}`}
    />
  );
}
