"""One routes module per resource; `ROUTERS` is what the app includes under /api."""

from episodelake.api.routes import (
           annotations,
           episodes,
           groups,
           health,
           sets,
           sql,
           stats,
           steps,
           tasks,
)

ROUTERS = [health.router, tasks.router, episodes.router, steps.router, stats.router, sql.router,
           sets.router, annotations.router, groups.router]
