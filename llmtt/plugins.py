"""The plugin API: what a third-party agent or evaluator subclasses, receives and returns.

Import these names from here; the modules behind them may move. A package registers its plugin
under the entry-point group `llmtt.agents` or `llmtt.evaluators` (llmtt's own built-ins use the
same groups), or a project names an evaluator in llmtt.toml (`[evaluators] x = "module:Class"`).
"""

from llmtt.agents.base import Agent, AgentExit, RunContext
from llmtt.evaluation.evaluators.base import (
    EvaluationInput,
    EvaluationResult,
    Evaluator,
    EvaluatorConfig,
    ModelEvaluatorConfig,
    OneCriterionConfig,
    OneCriterionEvaluator,
    ToolUse,
    pass_fail,
)
from llmtt.spec.evaluation import Criterion

__all__ = [
    "Agent",
    "AgentExit",
    "Criterion",
    "EvaluationInput",
    "EvaluationResult",
    "Evaluator",
    "EvaluatorConfig",
    "ModelEvaluatorConfig",
    "OneCriterionConfig",
    "OneCriterionEvaluator",
    "RunContext",
    "ToolUse",
    "pass_fail",
]
