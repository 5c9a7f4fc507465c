"""The node process as a whole, below every layer and importing none of them: how it halts
when a directory it must write fails (process.halt).
"""
