"""The recovery planner: from a reduced session and today's configuration, the one next action (docs/recovery.md).

``plan_recovery`` (session-v2 §17, with v3's ``settleFromRaw``; the spec's own fixes §18 P1–P4) only plans: the
live loop and ``resume`` commit what it returns and ask again.  Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from tiny_agent.agent.compaction import CONTEXT_FULL
from tiny_agent.agent.configuration import Configuration
from tiny_agent.fold.contract import is_blank
from tiny_agent.fold.version import PROFILES
from tiny_agent.journal.json_profile import LineDecoder, ProfileViolation
from tiny_agent.journal.state import (
    CompactionOperation,
    ConfigurationSnapshot,
    IdleOperation,
    LatestAttempt,
    RunOperation,
    SessionState,
    ToolCallState,
)
from tiny_agent.journal.tools import ToolDeclaration
from tiny_agent.journal.transcript import SYNTHETIC_TEXTS, AssistantMessage, ToolMessage
from tiny_agent.providers.endpoint import parse_routing_identity
from tiny_agent.wire.registry import parse_adapter_identity

BlockedReason = Literal["configuration_changed", "environment_changed", "replay_declaration_changed", "attempts_exhausted"]


class CurrentConfiguration(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the caller would use now: the planner's ``current`` input.  ``maxAttempts`` (per step, transport retries
    included, within the journal's limit) and ``maxSteps`` (per run) are ours: the fixtures omit them (session-v2's)."""

    configurationDigest: str
    environmentIdentity: str
    tools: list[ToolDeclaration]
    maxAttempts: int = 2
    maxSteps: int | UnsetType = UNSET
    contextFull: bool = False
    """The active context is estimated past its share of the window: a run stops to compact (not in session-v2)."""

    def tool(self, name: str) -> ToolDeclaration | None:
        """Lookup by name, first match."""
        return next((tool for tool in self.tools if tool.name == name), None)


class PlanError(msgspec.Struct, frozen=True):
    code: str
    message: str


ABORTED: Final = PlanError(code="aborted", message="Operation aborted")
MODEL_ERROR: Final = PlanError(code="model_error", message="provider request failed")
CUT_OFF: Final = PlanError(code="length_without_calls", message="the answer was cut off by the model's token limit")
EMPTY_ANSWER: Final = PlanError(code="empty_answer", message="the model's answer was empty")
STEP_LIMIT_CODE: Final = "step_limit"

RETRYABLE_STATUSES: Final = frozenset((429, 500, 502, 503, 504, 529))
"""Responses that say "try again later": rate limits, overloaded or failing upstreams (Anthropic's 529)."""



class Finish(msgspec.Struct, tag_field="type", tag="finish", frozen=True):
    outcome: Literal["completed", "aborted", "failed"]
    completion: Literal["normal", "truncated"] | UnsetType = UNSET
    finalEntryId: str | UnsetType = UNSET
    error: PlanError | UnsetType = UNSET


class StartStep(msgspec.Struct, tag_field="type", tag="startStep", frozen=True):
    stepKind: Literal["assistant", "compaction"]
    attempt: int
    contextThroughEntryId: str
    stepId: str | UnsetType = UNSET


class StartTool(msgspec.Struct, tag_field="type", tag="startTool", frozen=True):
    mode: Literal["start", "replay"]
    assistantEntryId: str
    toolIndex: int
    toolName: str
    arguments: dict[str, Any]
    toolStartedId: str | UnsetType = UNSET


class SyntheticResult(msgspec.Struct, frozen=True):
    assistantEntryId: str
    toolIndex: int
    toolCallId: str
    toolName: str
    reason: Literal["invalidArguments", "unknownTool", "truncated", "aborted", "interrupted"]
    content: str
    toolStartedId: str | UnsetType = UNSET
    """Interrupted results only: the record that announced the call."""
    resultEntryId: str | UnsetType = UNSET
    """Interrupted results only: the fact id the announcement reserved for the answer."""


class AppendSynthetic(msgspec.Struct, tag_field="type", tag="appendSynthetic", frozen=True):
    results: list[SyntheticResult]


class CloseAttempt(msgspec.Struct, tag_field="type", tag="closeAttempt", frozen=True):
    error: PlanError


class Blocked(msgspec.Struct, tag_field="type", tag="blocked", frozen=True):
    reason: BlockedReason


class SettleFromRaw(msgspec.Struct, tag_field="type", tag="settleFromRaw", frozen=True):
    """v3: the open attempt's response is on record; settle from it instead of asking again."""

    attemptId: str
    rawId: str


Plan = Finish | StartStep | StartTool | AppendSynthetic | CloseAttempt | Blocked | SettleFromRaw

IDLE_FINISH: Final = Finish(outcome="completed", completion="normal")


def plan_recovery(state: SessionState, current: CurrentConfiguration) -> Plan:
    """The next action for ``state`` (session-v2 §17.4, first match wins)."""
    operation = state.operation
    if type(operation) is not RunOperation and type(operation) is not CompactionOperation:
        return IDLE_FINISH
    step = operation.step
    if operation.abortRequested:
        return _plan_abort(state, operation, step)
    if step is UNSET:
        if isinstance(operation, RunOperation):
            return StartStep(stepKind="assistant", attempt=1, contextThroughEntryId=operation.inputEntryId)
        return StartStep(stepKind="compaction", attempt=1, contextThroughEntryId=operation.inputThroughEntryId)
    if step.status == "failed":
        return Finish(outcome="failed", error=MODEL_ERROR)
    if step.status == "attempting":
        return _open_attempt(state, step, current)
    if isinstance(operation, CompactionOperation):
        return Finish(outcome="completed", finalEntryId=operation.resultEntryId)
    return _settled_run_step(state, operation, step, current)


def _open_attempt(state: SessionState, step: LatestAttempt, current: CurrentConfiguration) -> Plan:
    """An attempt is open: settle its response on record (unless it says "try again later" or was cut off, and
    attempts remain: then retry, as the live loop would), retry it, or say why neither is safe."""
    limit = max(1, min(current.maxAttempts, PROFILES[state.version].max_attempt))
    same_configuration = step.configurationDigest == current.configurationDigest
    if step.rawId is not UNSET:
        retryable = step.rawCut is True or (step.rawStatus is not UNSET and step.rawStatus in RETRYABLE_STATUSES)
        if retryable and step.attempt < limit and same_configuration:
            return _retry(step)
        return SettleFromRaw(attemptId=step.attemptId, rawId=step.rawId)
    if step.attempt >= limit:
        return Blocked(reason="attempts_exhausted")
    if not same_configuration:
        return Blocked(reason="configuration_changed")
    return _retry(step)


def _retry(step: LatestAttempt) -> StartStep:
    return StartStep(
        stepKind=step.stepKind, attempt=step.attempt + 1, stepId=step.stepId, contextThroughEntryId=step.contextThroughEntryId
    )


def _plan_abort(state: SessionState, operation: RunOperation | CompactionOperation, step: LatestAttempt | UnsetType) -> Plan:
    if step is not UNSET and step.status == "attempting":
        return CloseAttempt(error=ABORTED)
    if type(operation) is RunOperation and step is not UNSET and step.status == "settled":
        results = []
        for call in _classify_calls(state, operation, step):
            if call.pending is not None:
                results.append(_interrupted(call.pending))
            elif call.status == "untouched":
                results.append(_pre_execution(call, "aborted"))
        if results:
            return AppendSynthetic(results=results)
    return Finish(outcome="aborted")


def _settled_run_step(state: SessionState, run: RunOperation, step: LatestAttempt, current: CurrentConfiguration) -> Plan:
    calls = _classify_calls(state, run, step)
    if not calls:
        # A `length` entry without calls cannot be completed (§18 P5); the
        # planner still answers as rule 7 says and the caller, who writes the
        # record, finishes such a run as failed.
        return Finish(outcome="completed", completion="normal", finalEntryId=step.settledEntryId)
    untouched = [call for call in calls if call.status == "untouched"]
    if step.stopReason == "length":
        if untouched:
            return AppendSynthetic(results=[_pre_execution(call, "truncated") for call in untouched])
        return Finish(outcome="completed", completion="truncated", finalEntryId=step.settledEntryId)
    if untouched:
        return _first_untouched(untouched[0], current)
    pending = [call.pending for call in calls if call.pending is not None]
    if pending:
        return _pending_call(min(pending, key=lambda started: started.toolIndex), current)
    if current.maxSteps is not UNSET and state.runSteps >= current.maxSteps:
        # Every call of the last step is answered, so stopping here leaves a transcript the
        # provider accepts; a failed run needs nothing more (session-v2 §9.7).
        error = PlanError(code=STEP_LIMIT_CODE, message=f"stopped at the step limit after {state.runSteps} model steps")
        return Finish(outcome="failed", error=error)
    if current.contextFull:
        # A compaction cannot start while the run is open: the run ends here (its calls answered),
        # the caller compacts, and a continuation run takes the task up again.
        return Finish(outcome="failed", error=CONTEXT_FULL_ERROR)
    if state.contextBoundary is None:
        raise AssertionError("a settled step always leaves a context boundary")
    return StartStep(stepKind="assistant", attempt=1, contextThroughEntryId=state.contextBoundary)


CONTEXT_FULL_ERROR: Final = PlanError(
    code=CONTEXT_FULL, message="the context outgrew the model's window; compacting and continuing in a new run"
)


def _first_untouched(call: _Call, current: CurrentConfiguration) -> Plan:
    if current.tool(call.name) is None:
        return AppendSynthetic(results=[_pre_execution(call, "unknownTool")])
    arguments = _parse_arguments(call.arguments)
    if arguments is None:
        return AppendSynthetic(results=[_pre_execution(call, "invalidArguments")])
    return StartTool(
        mode="start", assistantEntryId=call.assistant_entry_id, toolIndex=call.index, toolName=call.name, arguments=arguments
    )


def _pending_call(started: ToolCallState, current: CurrentConfiguration) -> Plan:
    if started.environmentIdentity != current.environmentIdentity:
        return Blocked(reason="environment_changed")
    declared = current.tool(started.toolName)
    if declared is None or not declared.definitionDigest:
        return Blocked(reason="configuration_changed")
    if started.replay == "safe":
        if declared.replay == "safe" and declared.replayKey == started.replayKey:
            return StartTool(
                mode="replay",
                assistantEntryId=started.assistantEntryId,
                toolIndex=started.toolIndex,
                toolStartedId=started.toolStartedId,
                toolName=started.toolName,
                arguments=started.arguments,
            )
        return Blocked(reason="replay_declaration_changed")
    return AppendSynthetic(results=[_interrupted(started)])


def _parse_arguments(text: str) -> dict[str, Any] | None:
    """The argument text as a JSON object, or None (answered ``invalidArguments``): parsed by the journal's strict
    profile (rule 9.2 leaves it open), so what a ``toolStarted`` could not hold is refused before it."""
    try:
        value = LineDecoder().decode(text.encode("utf-8"))
    except (ProfileViolation, UnicodeEncodeError):
        return None
    return value if type(value) is dict else None


# -- classifying the settled step's calls (§17.3) -----------------------------


CallStatus = Literal["pending", "answered", "untouched"]


class _Call(msgspec.Struct, frozen=True):
    assistant_entry_id: str
    index: int
    call_id: str
    name: str
    arguments: str
    status: CallStatus
    pending: ToolCallState | None = None


def _classify_calls(state: SessionState, run: RunOperation, step: LatestAttempt) -> list[_Call]:
    """The settling message's calls, each pending, answered or untouched."""
    settled_id = step.settledEntryId
    if settled_id is UNSET:
        return []
    record = state.entries[settled_id]
    message = record.message
    if type(message) is not AssistantMessage or message.tool_calls is UNSET:
        return []
    pending = {
        started.toolIndex: started
        for started in run.toolCalls
        if started.assistantEntryId == settled_id and started.status == "pending"
    }
    answered = {
        later.tool_call_id
        for later in state.transcript[record.transcriptIndex + 1 :]
        if type(later) is ToolMessage
    }
    calls = []
    for index, call in enumerate(message.tool_calls):
        started = pending.get(index)
        status: CallStatus = "pending" if started is not None else "answered" if call.id in answered else "untouched"
        calls.append(_Call(settled_id, index, call.id, call.function.name, call.function.arguments, status, started))
    return calls


def _pre_execution(call: _Call, reason: Literal["invalidArguments", "unknownTool", "truncated", "aborted"]) -> SyntheticResult:
    return SyntheticResult(
        assistantEntryId=call.assistant_entry_id,
        toolIndex=call.index,
        toolCallId=call.call_id,
        toolName=call.name,
        reason=reason,
        content=SYNTHETIC_TEXTS[reason],
    )


def _interrupted(started: ToolCallState) -> SyntheticResult:
    return SyntheticResult(
        assistantEntryId=started.assistantEntryId,
        toolIndex=started.toolIndex,
        toolCallId=started.toolCallId,
        toolName=started.toolName,
        toolStartedId=started.toolStartedId,
        resultEntryId=started.resultEntryId,
        reason="interrupted",
        content=SYNTHETIC_TEXTS["interrupted"],
    )


# -- words for people -----------------------------------------------------------

_BLOCKED_WHY: Final = {
    "configuration_changed": "the configuration (model, system prompt, tools or request options) differs from the open step's",
    "environment_changed": "the pending tool ran in another environment (working directory) than this one",
    "replay_declaration_changed": "the pending tool was declared safe to replay, but today's declaration differs",
    "attempts_exhausted": "both allowed attempts of the open step were started and neither response is on record",
}

_BLOCKED_REMEDY: Final = {
    "configuration_changed": "restore the configuration (model, --system, tools, options) or run `tiny-agent resume --abort`",
    "environment_changed": "resume from the original working directory (or set TINY_AGENT_ENVIRONMENT_IDENTITY), or `--abort`",
    "replay_declaration_changed": "restore the tool's declaration, or run `tiny-agent resume --abort`",
    "attempts_exhausted": "run `tiny-agent resume --abort` to close the run",
}


def describe_block(reason: str, differences: Sequence[Difference] = ()) -> str:
    """``<reason>: why; what to do`` — one line for a blocked recovery; with ``differences``, each field that differs
    (recorded → current) and the flags that restore them."""
    if reason == "configuration_changed" and differences:
        changed = "; ".join(f"{item.field} {item.recorded} → now {item.current}" for item in differences)
        flags = ", ".join(dict.fromkeys(item.restore for item in differences if item.restore))
        restore = f"restore it with {flags}" if flags else "restore it"
        started = "the open step was started with another configuration"
        return f"{reason}: {started}: {changed}; {restore}, or run `tiny-agent resume --abort`"
    return f"{reason}: {_BLOCKED_WHY[reason]}; {_BLOCKED_REMEDY[reason]}"


class Difference(msgspec.Struct, frozen=True):
    """One field of a configuration snapshot that differs from what a session recorded."""

    field: str
    recorded: str
    current: str
    restore: str = ""
    """The flag(s) that would bring the recorded value back, when there are such flags."""


def configuration_differences(recorded: ConfigurationSnapshot, current: ConfigurationSnapshot) -> list[Difference]:
    """Which snapshot fields differ, in words people can act on (pure; nothing is secret in a snapshot)."""
    found = _changed(("model", recorded.model, current.model, f"--model {recorded.model}"))
    found.extend(_routing_differences(recorded.routingIdentity, current.routingIdentity))
    found.extend(_adapter_differences(recorded.adapterIdentity, current.adapterIdentity))
    if recorded.systemPromptDigest != current.systemPromptDigest:
        found.append(
            Difference("system prompt", _short_digest(recorded.systemPromptDigest), _short_digest(current.systemPromptDigest),
                       "--system FILE (the same prompt text)")
        )
    found.extend(_tool_differences(recorded, current))
    found.extend(_instruction_differences(recorded, current))
    if recorded.outputOptionsDigest != current.outputOptionsDigest:
        found.extend(_option_differences(recorded, current))
    return found


def _option_differences(recorded: ConfigurationSnapshot, current: ConfigurationSnapshot) -> list[Difference]:
    """The request options that differ, by name, when both snapshots spell them out (v3 ``requestOptions``)."""
    old, new = recorded.requestOptions, current.requestOptions
    found = []
    if old is not UNSET and new is not UNSET:
        for field, flag, before, after in (
            ("max tokens", "--max-tokens", old.maxTokens, new.maxTokens),
            ("tool choice", "--tool-choice", old.toolChoice, new.toolChoice),
        ):
            if before != after:
                old_value, new_value = ("not set" if value is UNSET else str(value) for value in (before, after))
                restore = f"without {flag}" if before is UNSET else f"{flag} {before}"
                found.append(Difference(field, old_value, new_value, restore))
    return found or [
        Difference("output options", _short_digest(recorded.outputOptionsDigest), _short_digest(current.outputOptionsDigest),
                   "the same --max-tokens and --tool-choice")
    ]


def _changed(*fields: tuple[str, str, str, str]) -> list[Difference]:
    """A difference for each ``(field, recorded, current, restore)`` whose values differ."""
    return [Difference(*field) for field in fields if field[1] != field[2]]


def _routing_differences(recorded: str, current: str) -> list[Difference]:
    old, new = parse_routing_identity(recorded), parse_routing_identity(current)
    if old is None or new is None:
        return _changed(("endpoint", recorded, current, ""))
    return _changed(
        ("provider", old.profile, new.profile, f"--provider {old.profile}"),
        ("base URL", old.base_url, new.base_url, f"--base-url {old.base_url}"),
    )


def _adapter_differences(recorded: str, current: str) -> list[Difference]:
    if recorded == current:
        return []
    old, new = parse_adapter_identity(recorded), parse_adapter_identity(current)
    found = _changed(
        ("API", old.api, new.api, f"--api {old.api}"),
        ("adapters", ",".join(old.adapters) or "none", ",".join(new.adapters) or "none", "the provider the session used"),
    )
    return found or [Difference("adapter identity", recorded, current)]


def _tool_differences(recorded: ConfigurationSnapshot, current: ConfigurationSnapshot) -> list[Difference]:
    old = {tool.name: tool.definitionDigest for tool in recorded.tools}
    new = {tool.name: tool.definitionDigest for tool in current.tools}
    if old == new:
        return []
    restore = "--allow-bash" if "bash" in old and "bash" not in new else ""
    changed = sorted(name for name in old.keys() & new.keys() if old[name] != new[name])
    detail = f" (definition changed: {', '.join(changed)})" if changed else ""
    # An MCP tool's digest covers its server's identity and tool list (docs/tools.md): name the server.
    moved = set(changed) | (old.keys() ^ new.keys())
    servers = sorted({name.split("__")[1] for name in moved if name.startswith("mcp__") and name.count("__") >= 2})
    if servers:
        restore = f"the same MCP server{'s' if len(servers) > 1 else ''} ({', '.join(servers)}) with --mcp"
        detail += f" (MCP server changed: {', '.join(servers)})"
    return [Difference("tools", ",".join(sorted(old)) or "none", ",".join(sorted(new)) + detail or "none", restore)]


def _instruction_differences(recorded: ConfigurationSnapshot, current: ConfigurationSnapshot) -> list[Difference]:
    """One difference per instruction file or skill added, removed or changed, named by its path."""
    old = {item.path: item.digest for item in recorded.instructions or []}
    new = {item.path: item.digest for item in current.instructions or []}
    return [
        Difference(f"instruction file {path}", _short_digest(old.get(path, "absent")), _short_digest(new.get(path, "absent")),
                   "--no-project-instructions" if path not in old and not old else "")
        for path in sorted(old.keys() | new.keys())
        if old.get(path) != new.get(path)
    ]


def _short_digest(digest: str) -> str:
    return digest[:19] + "…" if len(digest) > 20 else digest


def blocked_reason(plan: Blocked, state: SessionState, configuration: Configuration) -> str:
    """The blocked line, naming each configuration field that differs from the open step's."""
    operation = state.operation
    if plan.reason != "configuration_changed" or isinstance(operation, IdleOperation) or operation.step is UNSET:
        return describe_block(plan.reason)
    recorded = operation.step.configurationSnapshot
    return describe_block(plan.reason, configuration_differences(recorded, configuration.snapshot()))


def explain(plan: Plan, state: SessionState, *, verbose: bool = False) -> str:
    """One line for people: what the plan does and why (steps by their number in the run; ids only when verbose)."""
    match plan:
        case Finish():
            return _explain_finish(plan, state)
        case StartStep() if plan.attempt > 1:
            step = "the summary" if plan.stepKind == "compaction" else f"step {state.runSteps}"
            ids = f" {plan.stepId}," if verbose else ""
            return f"retry {step} ({ids}attempt {plan.attempt}): the previous attempt got no usable answer"
        case StartStep():
            step = "the summary" if plan.stepKind == "compaction" else f"step {state.runSteps + 1} of the run"
            ids = f", context through {plan.contextThroughEntryId}" if verbose else ""
            return f"ask the model ({step}{ids})"
        case StartTool() if plan.mode == "replay":
            return f"run {plan.toolName} again (call {plan.toolIndex}): its outcome is unknown and it is safe to replay"
        case StartTool():
            return f"run {plan.toolName} (call {plan.toolIndex}) with {json.dumps(plan.arguments, ensure_ascii=False)}"
        case AppendSynthetic():
            reasons = ", ".join(f"call {result.toolIndex} {result.reason}" for result in plan.results)
            return f"answer tool calls without running them ({reasons})"
        case CloseAttempt():
            return "close the open model attempt as aborted (an abort was requested)"
        case SettleFromRaw() if verbose:
            return f"settle attempt {plan.attemptId} from its stored response {plan.rawId} (no new provider request)"
        case SettleFromRaw():
            return "settle the open attempt from its stored response (no new provider request)"
        case Blocked():
            return f"blocked, {describe_block(plan.reason)}"


def _explain_finish(plan: Finish, state: SessionState) -> str:
    if type(state.operation) not in (RunOperation, CompactionOperation):
        return "nothing to do: the session is idle"
    if plan.outcome == "aborted":
        return "finish the operation as aborted"
    if plan.outcome == "failed" and plan.error is not UNSET and plan.error != MODEL_ERROR:
        return f"finish the run: {plan.error.message}" + (" (--max-steps)" if plan.error.code == STEP_LIMIT_CODE else "")
    if plan.outcome == "failed":
        return "finish the run as failed: its model step failed"
    if plan.completion is UNSET:
        return "finish the compaction"
    return f"finish the run as completed ({plan.completion})"


def committable(plan: Plan, state: SessionState) -> Plan:
    """What the caller commits for ``plan``: a run cannot complete with an answer cut off by the token limit
    (§18 P5) or an empty one (§9.7), so it finishes failed, saying which; the answer stays in the transcript."""
    if type(plan) is not Finish or plan.completion != "normal" or plan.finalEntryId is UNSET:
        return plan
    final = state.entries[plan.finalEntryId]
    content = final.message.content if final.message is not None else None
    if final.stopReason == "length":
        return Finish(outcome="failed", error=CUT_OFF)
    if final.stopReason == "stop" and (content is None or is_blank(content)):
        return Finish(outcome="failed", error=EMPTY_ANSWER)
    return plan
