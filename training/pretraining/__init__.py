"""`lmforge pretrain`: the loop (pretrain), its config (config), setup (setup: engine, data, resume), the
module it trains (module), checkpoints and resume (checkpoint, resume), the token budget (budget),
the outputs (outputs), the device feed and counters (feed, step_stats, step_profile), the DeepSpeed or
compiled engine (engine, compiled, cpu_dropout), micro-batch and memory planning (micro_batch,
memory_plan, run_plan), and the token shards reader every later stage also reads (data, batches).

May import: common, schemas, training.runtime, training.models.
"""
