"""`elake enrich`, `elake search` and `elake similar`: derived columns after the write,
full-text search over screen text, reasoning and goals, and screens like a step's."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated, Any

import typer

from episodelake.api.cli.app import Commands, globals_of
from episodelake.api.cli.model_options import Fields, with_fields
from episodelake.collectors.jobs.bulk import RayOptions

_ENRICH_EPILOG = """examples:

\b
  elake enrich                                  # every derivation, every step lacking it
  elake enrich --what ocr --workers 8
  elake enrich --what phash,thumbs --where "e.run_id = 'r7'"
  elake --lake s3://bucket/lake enrich --ray --ray-address auto   # tasks read the store"""

_SEARCH_EPILOG = """examples:

\b
  elake search "payment failed"
  elake search wifi --where "e.success = false" --limit 50 --json"""

_SIMILAR_EPILOG = """examples:

\b
  elake similar ep-123 4                        # the 10 nearest screens, any episode
  elake similar ep-123 4 --k 50 --where "e.policy_version = 'ckpt-40'" --json"""

commands = Commands()


@commands.command("enrich", summary="compute derived step columns (perceptual hash, thumbnails, OCR "
                  "text, embeddings) for stored steps that lack them", epilog=_ENRICH_EPILOG)
@with_fields(Fields(RayOptions, heading="cluster"))
def cmd_enrich(
    ctx: typer.Context,
    given: dict[str, Any],
    what: Annotated[str | None, typer.Option(metavar="NAMES", show_default=False,
                                             help="comma-separated derivations: phash, thumbs, ocr, "
                                             "embed (default all)")] = None,
    where: Annotated[str | None, typer.Option(metavar="SQL", help="only steps meeting this condition over "
                                              "episodes e JOIN steps s")] = None,
    workers: Annotated[int, typer.Option(help="processes computing in parallel (default 1)",
                                         show_default=False)] = 1,
) -> None:
    from episodelake.collectors.jobs.enrich import enrich
    from episodelake.lake.storage.lake import Lake

    names = [n.strip() for n in what.split(",") if n.strip()] if what is not None else None
    report = enrich(Lake(globals_of(ctx).lake, create=False), names, where=where, workers=workers,
                    progress=True, ray=RayOptions(**given))
    print(report.summary())


@commands.command("search", summary="full-text search over screen text (OCR), thinking, responses and "
                  "goals", epilog=_SEARCH_EPILOG)
def cmd_search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(metavar="QUERY", show_default=False,
                                         help="the words to find (every one must match)")],
    where: Annotated[str | None, typer.Option(metavar="SQL", help="a condition over episodes e JOIN "
                                              "steps s")] = None,
    limit: Annotated[int, typer.Option(help="hits to print (default 20)", show_default=False)] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON lines instead of a table")] = False,
) -> None:
    from episodelake.lake.curation.search import search
    from episodelake.lake.storage.lake import Lake

    hits = search(Lake(globals_of(ctx).lake, create=False), query, where=where, limit=limit)
    for hit in hits:
        if as_json:
            print(json.dumps(asdict(hit)))
        else:
            step = "-" if hit.step is None else hit.step
            print(f"{hit.episode_id}\t{step}\t{hit.field}\t{hit.snippet}")
    if not hits and not as_json:
        print("no match")


@commands.command("similar", summary="the steps whose screenshots look most like a step's, from any "
                  "episode, run or policy version", epilog=_SIMILAR_EPILOG)
def cmd_similar(
    ctx: typer.Context,
    episode_id: Annotated[str, typer.Argument(metavar="EPISODE", show_default=False, help="the step's episode id")],
    step: Annotated[int, typer.Argument(metavar="STEP", show_default=False, help="the step's number")],
    k: Annotated[int, typer.Option("--k", help="neighbours to print (default 10)", show_default=False)] = 10,
    where: Annotated[str | None, typer.Option(metavar="SQL", help="only neighbours meeting this condition "
                                              "over episodes e JOIN steps s")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON lines instead of a table")] = False,
) -> None:
    from episodelake.lake.curation.similar import similar
    from episodelake.lake.storage.lake import Lake

    found = similar(Lake(globals_of(ctx).lake, create=False), episode_id, step, k=k, where=where)
    for n in found:
        print(json.dumps(asdict(n)) if as_json else f"{n.episode_id}\t{n.step}\t{n.distance:.4f}")
    if not found and not as_json:
        print("no neighbour")
