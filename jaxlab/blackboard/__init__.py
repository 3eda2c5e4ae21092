"""P8 blackboard: multi-agent data discovery over a lake of real tables (Salemi et al.).

Example: `examples/blackboard.py` (a jupytext notebook; rendered in the docs site).
"""

from ._agents import METHODS as METHODS
from ._agents import AgentModel as AgentModel
from ._agents import Discovery as Discovery
from ._agents import DiscoveryConfig as DiscoveryConfig
from ._agents import LMAgentModel as LMAgentModel
from ._agents import QueryAnswer as QueryAnswer
from ._agents import answer_query as answer_query
from ._agents import blackboard as blackboard
from ._agents import blackboard_tokens as blackboard_tokens
from ._agents import bm25_index as bm25_index
from ._agents import bm25_rerank as bm25_rerank
from ._agents import dense_index as dense_index
from ._agents import master_slave as master_slave
from ._agents import oracle as oracle
from ._agents import plan_query as plan_query
from ._agents import prefetch as prefetch
from ._agents import relevance as relevance
from ._agents import retrieval as retrieval
from ._agents import run_methods as run_methods
from ._agents import single_agent as single_agent
from ._agents import snippet as snippet
from ._bm25 import BM25 as BM25
from ._dense import DenseIndex as DenseIndex
from ._lake import LICENCES as LICENCES
from ._lake import SOURCES as SOURCES
from ._lake import Lake as Lake
from ._lake import installed_sources as installed_sources
from ._lake import load_lake as load_lake
from ._lake import partition_description as partition_description
from ._lake import profile_text as profile_text
from ._plan import AGGREGATES as AGGREGATES
from ._plan import OPERATORS as OPERATORS
from ._plan import OUTPUTS as OUTPUTS
from ._plan import ColumnRef as ColumnRef
from ._plan import Condition as Condition
from ._plan import Plan as Plan
from ._plan import PlanError as PlanError
from ._plan import execute as execute
from ._plan import format_plan as format_plan
from ._plan import parse_plan as parse_plan
from ._score import ANSWER_TYPES as ANSWER_TYPES
from ._score import discovery_prf as discovery_prf
from ._score import list_f1 as list_f1
from ._score import relative_error_score as relative_error_score
from ._score import score_answer as score_answer
from ._table import Table as Table
from ._table import TableError as TableError
from ._tasks import LEXICAL_STOPWORDS as LEXICAL_STOPWORDS
from ._tasks import NOT_IN_LAKE as NOT_IN_LAKE
from ._tasks import Task as Task
from ._tasks import generate_tasks as generate_tasks
from ._tasks import load_tasks as load_tasks
from ._tasks import save_tasks as save_tasks
