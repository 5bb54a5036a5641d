"""The run stages (docs/architecture.md, "One run, stage by stage"): ``config`` (what the user asked), ``plan`` (a
frozen plan whose cells carry their status, ``cell``), ``build`` (a model and the contexts its code receives),
``models`` (training and checkpoints), ``evaluate`` (a cell and a model -> a record) and ``driver`` (runs a plan
through an executor and alone writes records)."""
