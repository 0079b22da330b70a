"""Composing contracts into pipelines: whether one step's output schema fits the
next step's input (``prover``), the composed ``contract``, edge ``predicates``,
and the pipeline file format and workflow input (``pipeline_spec``, ``pipeline_run``).
"""
