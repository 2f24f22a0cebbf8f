"""The labelling API fuzzed from its own OpenAPI schema with Schemathesis: every operation, with inputs the
schema allows and inputs it forbids. No answer is a 5xx, every refusal is a 4xx with a JSON ``detail``,
answers that succeed match the schema, and a refused request leaves at most a line in the log, never a
traceback; over queries to judge, clips to place in a ranking and clips to rate. (Schemathesis' pytest plugin
does not run under pytest 9; its strategies do, through hypothesis.)"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np
import pytest
import schemathesis
from helpers import random_pairs
from hypothesis import HealthCheck, given, settings
from omegaconf import OmegaConf
from test_annotate import publish

from rlhp.human.server.app import create_app
from rlhp.human.store import QueryStore
from rlhp.runs import RunFolder


def api_schema(folder: Path, asks: str = "pairs") -> schemathesis.BaseSchema:
    """The schema of an app over a run folder with six queries, each wanting two labels (``asks`` pairs), six
    clips to place in a ranking (``asks`` rank), or six clips to rate from 1 to 5 (``asks`` rate)."""
    store = QueryStore(RunFolder(folder).queries_db)
    if asks == "pairs":
        publish(folder, 6, wanted=2)
    elif asks == "rank":
        store.publish_clips(np.arange(3), 0, random_pairs(3), "")
    else:
        store.publish_ratings(np.arange(3), 0, random_pairs(3), "", 5)
    RunFolder(folder).write_record(OmegaConf.create({"seed": 0}), [])
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(folder, lease_s=60))


with tempfile.TemporaryDirectory() as _tmp:
    OPERATIONS = [result.ok().label for result in api_schema(Path(_tmp)).get_all_operations()]


@pytest.mark.parametrize("mode", [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE],
                         ids=lambda m: m.value)
@pytest.mark.parametrize("asks", ["pairs", "rank", "rate"])
@pytest.mark.parametrize("label", OPERATIONS)
def test_every_operation_answers_every_input_without_a_server_error(tmp_path, label, mode, asks, caplog):
    if label == "GET /api/status" and mode == schemathesis.GenerationMode.NEGATIVE:
        pytest.skip("the status takes no input: there is nothing to make invalid")
    operation = next(r.ok() for r in api_schema(tmp_path, asks).get_all_operations() if r.ok().label == label)

    @given(operation.as_strategy(generation_mode=mode))
    @settings(max_examples=60, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case: schemathesis.Case) -> None:
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            response = case.call()
        assert response.status_code < 500, (case.method, case.path, case.query, case.body, response.text)
        if response.status_code >= 400:
            assert response.headers["content-type"][0].startswith("application/json")
            assert response.json()["detail"]
        else:
            case.validate_response(response)
        assert not [r for r in caplog.records if r.exc_info], "a refused request logged a traceback"

    check()


def test_the_schema_lists_every_operation_of_the_page():
    assert sorted(OPERATIONS) == ["GET /api/next", "GET /api/status", "POST /api/answers", "POST /api/ratings",
                                  "POST /api/release", "POST /api/undo"]
