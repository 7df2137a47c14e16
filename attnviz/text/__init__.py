"""text floor"""
