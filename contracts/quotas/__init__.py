"""Provider quotas and tenant budgets shared by every worker (docs/quotas.md).

``config``: what an operator declares (``[worker.quotas]``), checked at worker
start. ``wire``: what crosses between a run and an account workflow. ``ledger``:
the account's deterministic bookkeeping (windows, leases, fair queue, periods).
``plan``: which accounts a run's calls go through, resolved where the run starts.
"""
