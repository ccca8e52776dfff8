"""trajpub"""
