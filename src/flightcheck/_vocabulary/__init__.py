"""The vocabulary every layer shares: facts, intent, results, plan, report, errors.

The lowest layer: it imports nothing else of flightcheck.
"""
