"""measures floor"""
