"""Storage: the payload store every worker shares, its S3 driver, what happens
when a payload cannot be read, and the conversation store built on it.

Not activities: these are the classes activities, the worker and the client
read and write through. No Temporal activity is defined here.
"""
