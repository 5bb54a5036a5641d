# harness.testing's fixtures (tiny_bert, tiny_roberta, smoke_profile, harness_cli) for these tests.
pytest_plugins = ["harness.testing"]
