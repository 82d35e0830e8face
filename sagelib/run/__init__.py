"""The batch runner behind ``sagelib run``: notebooks, parameters, execution with papermill, reports."""
