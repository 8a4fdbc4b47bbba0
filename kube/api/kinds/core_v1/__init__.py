"""core/v1: the original API group, split by concern"""
