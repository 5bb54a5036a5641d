"""The run stages (DESIGN.md "Runner"): ``config`` (what the user asked), ``plan`` (a frozen plan whose cells carry
their status), ``models`` (the one place that builds, trains, checkpoints and loads a model), ``evaluate`` (a cell and a
model -> a record) and ``driver`` (runs a plan through an executor and alone writes records)."""
