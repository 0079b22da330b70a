"""Code mode: the program's limits and sandbox io (``program``) and the typed
stubs the model writes its program against (``stubs``).
"""
