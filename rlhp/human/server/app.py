"""The annotation web app (FastAPI): the labelling page and the JSON API behind it, over a run folder.

It reads and writes the run's ``queries.sqlite`` and serves clips from its ``media/``; it imports
nothing of the training loop.
"""

from __future__ import annotations

import logging
import secrets
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Literal

from fastapi import Body, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from markdown_it import MarkdownIt
from pydantic import BaseModel, Field
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint

from rlhp.data.ratings import MAX_SCALE
from rlhp.human.schema import Person, QueryError
from rlhp.human.schema import Query as StoredQuery
from rlhp.human.server.answers import AnswerStore
from rlhp.runs import RunFolder

log = logging.getLogger(__name__)

MAX_BODY = 4096
"""Largest request body accepted, in bytes (an answer is a few dozen)."""
PAGE = files("rlhp.human.server") / "page"
NAME = r"^[A-Za-z0-9_ .@+-]+$"
r"""An annotator's name: ASCII, as the page's own input allows and as the OpenAPI schema's (ECMA) regex reads
``\w``; Python's ``\w`` would also take any Unicode letter, which the schema promises to refuse."""
Annotator = Annotated[str, Field(min_length=1, max_length=64, pattern=NAME,
                                 description="the labeller's name (letters, digits, space, . @ + - _)")]
Choice = Literal["left", "right", "equal", "cant_tell"]


class ClipPair(BaseModel):
    """A query handed to an annotator: its clips' URLs, when the lease on it ends, what to judge (the run's
    instructions as given, Markdown, and as HTML; empty when it gave none), and whether it places the left clip in
    the run's ranking (``querent.mode=rank``: the right one is ranked already); ``scale`` is the rating scale when it
    asks for a rating of the left clip alone (``querent.mode=rate``: ``right`` is empty), 0 when it compares two."""

    query_id: int
    left: str
    right: str
    lease_expires: float
    instructions: str
    instructions_html: str
    placing: bool = False
    scale: int = 0


@lru_cache(maxsize=16)
def to_html(markdown: str) -> str:
    """Instructions as HTML: CommonMark with raw HTML escaped, so the text cannot script the page."""
    return MarkdownIt("commonmark", {"html": False}).render(markdown)


class NextQuery(BaseModel):
    """The next query for an annotator (null when none is waiting) and how many remain."""

    query: ClipPair | None
    pending: int


class AnswerIn(BaseModel):
    """One answer: is the left clip better, the right one, are they equal, or can't the person tell?"""

    query_id: Annotated[int, Field(ge=0, lt=2**63)]  # SQLite's integers
    annotator: Annotator
    label: Choice


class AnswerOut(BaseModel):
    """The answer recorded, with the annotator's count of answers."""

    query_id: int
    label: Choice
    labelled: int


class RatingIn(BaseModel):
    """One rating: a whole number from 1 to the query's scale, or null for "can't tell"."""

    query_id: Annotated[int, Field(ge=0, lt=2**63)]
    annotator: Annotator
    rating: Annotated[int, Field(ge=1, le=MAX_SCALE)] | None


class RatingOut(BaseModel):
    """The rating recorded, with the annotator's count of answers."""

    query_id: int
    rating: int | None
    labelled: int


class Who(BaseModel):
    """An annotator: whose last answer to withdraw, or whose leases to give up."""

    annotator: Annotator


class Released(BaseModel):
    """How many leases the annotator gave up."""

    released: int


class Status(BaseModel):
    """Queries by state (``answered``: those people answered, a ranking's comparisons included; ``implied``: pairs a
    ranking implied, nobody asked; ``in_training``: labels taken, of both), answers per annotator and how many
    rated a clip (``querent.mode=rate``), agreement on
    queries labelled by several people, each annotator's figures, and the clips ranked and their groups
    (``querent.mode=rank``; equal clips share one)."""

    pending: int
    answered: int
    implied: int
    in_training: int
    expired: int
    answers: int
    ratings: int
    annotators: dict[str, int]
    multi_labelled: int
    agreement: float | None
    team: dict[str, Person]
    ranked_clips: int
    ranking_groups: int


class _Guard(BaseHTTPMiddleware):
    """Refuses requests without the token (when there is one) and bodies larger than :data:`MAX_BODY`."""

    def __init__(self, app: FastAPI, token: str | None) -> None:
        super().__init__(app)
        self.token = token

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if self.token is not None:
            given = (request.headers.get("x-rlhp-token") or request.query_params.get("token")
                     or request.cookies.get("rlhp_token") or "")
            if not secrets.compare_digest(given.encode(), self.token.encode()):
                return JSONResponse({"detail": "a valid token is required: open the URL the server printed"}, 401)
        if request.method in ("POST", "PUT", "PATCH"):
            length = request.headers.get("content-length")
            if length is None:
                return JSONResponse({"detail": "a Content-Length header is required"}, 411)
            if not length.isdigit() or int(length) > MAX_BODY:
                return JSONResponse({"detail": f"request bodies are limited to {MAX_BODY} bytes"}, 413)
        response = await call_next(request)
        if self.token is not None and request.query_params.get("token") == self.token:
            # The page's later requests (video sources, /docs) carry it without putting it in every URL.
            response.set_cookie("rlhp_token", self.token, httponly=True, samesite="strict")
        return response


def create_app(run_dir: str | Path, token: str | None = None, lease_s: float = 120.0) -> FastAPI:
    """The app over ``run_dir``; with ``token``, every request must carry it."""
    run = RunFolder(run_dir)
    if not run.path.is_dir():
        raise FileNotFoundError(f"no run folder at {str(run.path)!r}")
    store = AnswerStore(run.queries_db)
    run.media_dir.mkdir(exist_ok=True)
    app = FastAPI(title="rlhp annotation", version="1",
                  description="Label clips from an rlhp-train run: which of two does the task better, where a "
                              "new one goes in a ranking, or how well one does it on a scale.")
    app.add_middleware(_Guard, token=token)

    _refusals(app)
    _labelling(app, store, lease_s)

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(PAGE / "index.html", headers={"Cache-Control": "no-cache"})

    @app.post("/api/release", response_model=Released, summary="Give up my leases")
    def release(body: Annotated[Who, Body()]) -> Released:
        """Hand back every query leased to the annotator, as the page does when it opens (after a reload, the
        queries it held are handed out again at once, not when their leases run out)."""
        return Released(released=store.release(body.annotator))

    @app.get("/api/status", response_model=Status, summary="Progress of the labelling")
    def status() -> Status:
        """Queries pending, answered, in training and expired; answers per annotator; agreement; each
        annotator's accuracy on gold queries and agreement with the others."""
        return Status(**store.status())

    app.mount("/page", StaticFiles(directory=str(PAGE)), name="page")
    # StaticFiles refuses paths that leave media/ (.., absolute, symlinks out) and serves byte ranges.
    app.mount("/media", StaticFiles(directory=str(run.media_dir)), name="media")
    return app


def _refusals(app: FastAPI) -> None:
    """A refused query is its own status and message; an invalid request a 422 naming each error, not its value."""

    @app.exception_handler(QueryError)
    def refused(request: Request, err: QueryError) -> JSONResponse:
        return JSONResponse({"detail": str(err)}, err.status)

    @app.exception_handler(RequestValidationError)
    def invalid(request: Request, err: RequestValidationError) -> JSONResponse:
        # Each error without the value sent: one that JSON cannot carry (1e309 parses as infinity) would
        # turn FastAPI's own 422 into a 500 while echoing it back.
        detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in err.errors()]
        log.info("refused %s %s (422): %s", request.method, request.url.path,
                 "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in detail))
        return JSONResponse({"detail": detail}, 422)


def _labelling(app: FastAPI, store: AnswerStore, lease_s: float) -> None:
    """The routes a person labels through: the next query leased, an answer, a rating, an undo."""

    def clip_pair(query: StoredQuery) -> ClipPair:
        return ClipPair(query_id=query.id, left=f"media/{query.left_clip}", right=f"media/{query.right_clip}",
                        lease_expires=query.lease_expires, instructions=query.instructions,
                        instructions_html=to_html(query.instructions), placing=query.placing, scale=query.scale)

    @app.get("/api/next", response_model=NextQuery, summary="Lease the next query to an annotator")
    def next_query(annotator: Annotated[str, Query(min_length=1, max_length=64, pattern=NAME)]
                   ) -> NextQuery:
        """The newest query that this person has not answered and that wants more labels, leased to them
        for ``lease_s`` seconds; ``query`` is null when there is none."""
        query = store.lease_next(annotator, lease_s)
        return NextQuery(query=None if query is None else clip_pair(query), pending=store.count_answered()[1])

    @app.post("/api/answers", response_model=AnswerOut, summary="Answer a leased query",
              responses={404: {"description": "unknown query"},
                         409: {"description": "lease expired, or query already answered"}})
    def answer(body: Annotated[AnswerIn, Body()]) -> AnswerOut:
        """Record a label: ``left``, ``right``, ``equal`` or ``cant_tell`` (skipped, never trained on)."""
        labelled = store.answer(body.query_id, body.annotator, body.label)
        return AnswerOut(query_id=body.query_id, label=body.label, labelled=labelled)

    @app.post("/api/ratings", response_model=RatingOut, summary="Rate the clip of a leased query",
              responses={404: {"description": "unknown query"},
                         409: {"description": "lease expired, query already answered, or it compares two clips"},
                         422: {"description": "a rating off the query's scale"}})
    def rate(body: Annotated[RatingIn, Body()]) -> RatingOut:
        """Record a rating of a query's clip, from 1 to its ``scale`` (null: "can't tell", skipped)."""
        labelled = store.rate(body.query_id, body.annotator, body.rating)
        return RatingOut(query_id=body.query_id, rating=body.rating, labelled=labelled)

    @app.post("/api/undo", response_model=ClipPair, summary="Withdraw my last answer",
              responses={409: {"description": "nothing to undo, or the label is already in training"}})
    def undo(body: Annotated[Who, Body()]) -> ClipPair:
        """Delete the annotator's last answer and lease its query to them again, to answer anew."""
        return clip_pair(store.undo(body.annotator, lease_s))
