"""The run stage package: plan, build models, evaluate, record."""
