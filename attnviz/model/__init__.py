"""model floor"""
