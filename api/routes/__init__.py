"""One routes module per resource; `ROUTERS` is what the app includes under /api."""

from episodelake.api.routes import (
           annotations,
           branches,
           edits,
           episodes,
           exports,
           groups,
           health,
           jobs,
           overview,
           people,
           reruns,
           runs,
           search,
           sets,
           similar,
           sql,
           stats,
           steps,
           tasks,
           views,
)

ROUTERS = [health.router, tasks.router, episodes.router, steps.router, stats.router, overview.router, sql.router,
           sets.router, annotations.router, groups.router, exports.router, reruns.router, branches.router, runs.router,
           jobs.router, views.router, search.router, similar.router, edits.router, people.router]
