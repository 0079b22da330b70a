"""``python -m agentsteps.scripted_model --script FILE --port N`` (also ``agentsteps scripted-model``)."""

from .cli import main

main()
