"""Explanations of a trained model's predictions: which edges and features they used."""
