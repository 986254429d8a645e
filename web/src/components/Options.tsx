// The choices of a <select> whose values are their own labels (set kinds, policies, lake tags).

/** One <option> per value; none while the values are still loading. */
export function Options({ values }: { values: readonly string[] | undefined }) {
  return (
    <>
      {values?.map((v) => (
        <option key={v}>{v}</option>
      ))}
    </>
  );
}
