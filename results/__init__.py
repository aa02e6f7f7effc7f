"""Run records and what is derived from them, in three layers, each importing only those below
it: records/ (what a run recorded), model/ (the one cost model and what predicts through it),
report/ (the report's sections and the plan's outputs). May import: strategies, models, the
standard library, matplotlib. Not experiments or tf_config: the commands call results.
"""
